package driver

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestFetchFile: executors fetch exactly the shipped files, whole, with
// their mode, over the authenticated control plane; nothing else is served.
func TestFetchFile(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "train")
	data := bytes.Repeat([]byte("spindle"), 400000) // several chunks
	if err := os.WriteFile(prog, data, 0o750); err != nil {
		t.Fatal(err)
	}
	files, _, archives, served := shipFromDriver([]string{prog, "hdfs:///shared/lib.py"}, nil, []string{prog + ".tgz#env"})
	if files[0] != ShippedScheme+"train" || files[1] != "hdfs:///shared/lib.py" || archives[0] != ShippedScheme+"train.tgz#env" {
		t.Fatalf("rewritten to %v %v", files, archives)
	}
	signer, err := auth.NewSigner("0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(signer.ServerOptions()...)
	driverpb.RegisterControlServer(srv, &controlServer{served: served, logger: slog.New(slog.DiscardHandler)})
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), append(signer.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := driverpb.NewControlClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()

	fetch := func(name string) ([]byte, uint32, error) {
		stream, err := client.FetchFile(ctx, &driverpb.FetchFileRequest{Name: name})
		if err != nil {
			return nil, 0, err
		}
		var buf bytes.Buffer
		var mode uint32
		for {
			c, err := stream.Recv()
			if err == io.EOF {
				return buf.Bytes(), mode, nil
			}
			if err != nil {
				return nil, 0, err
			}
			if mode == 0 {
				mode = c.GetMode()
			}
			buf.Write(c.GetData())
		}
	}
	got, mode, err := fetch("train")
	if err != nil || !bytes.Equal(got, data) || mode != 0o750 {
		t.Fatalf("fetched %d bytes, mode %o, %v", len(got), mode, err)
	}
	for _, name := range []string{"lib.py", "../train", "nope"} {
		if _, _, err := fetch(name); status.Code(err) != codes.NotFound {
			t.Errorf("fetch %q: %v, want NotFound", name, err)
		}
	}
}

func TestShipCommand(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"bin/logreg", "train.py", "conf.txt"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, tc := range map[string]struct {
		cmd       []string
		local     bool
		files     []string
		wantCmd   []string
		wantFiles int
	}{
		"relative program, cluster":  {[]string{"bin/logreg", "--lr", "0.5"}, false, nil, []string{"./logreg", "--lr", "0.5"}, 1},
		"relative program, local":    {[]string{"bin/logreg"}, true, nil, []string{filepath.Join(dir, "bin/logreg")}, 0},
		"python script, cluster":     {[]string{"python3", "-u", "train.py", "--epochs", "2"}, false, nil, []string{"python3", "-u", "train.py", "--epochs", "2"}, 1},
		"script shipped already":     {[]string{"python3", "train.py"}, false, []string{"train.py"}, []string{"python3", "train.py"}, 1},
		"python module":              {[]string{"python3", "-m", "train"}, false, nil, []string{"python3", "-m", "train"}, 0},
		"missing script":             {[]string{"python3", "nope.py"}, false, nil, []string{"python3", "nope.py"}, 0},
		"program on the PATH":        {[]string{"logreg"}, false, nil, []string{"logreg"}, 0},
		"absolute program":           {[]string{"/usr/bin/env", "train.py"}, false, nil, []string{"/usr/bin/env", "train.py"}, 0},
		"absolute interpreter":       {[]string{"/usr/bin/python3", "train.py"}, false, nil, []string{"/usr/bin/python3", "train.py"}, 1},
		"python script, local as is": {[]string{"python3", "train.py"}, true, nil, []string{"python3", "train.py"}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			c := &Config{Command: append([]string(nil), tc.cmd...), Files: tc.files}
			c.ShipCommand(dir, tc.local)
			if len(c.Files) != tc.wantFiles || len(c.Command) != len(tc.wantCmd) {
				t.Fatalf("command %v, files %v", c.Command, c.Files)
			}
			for i := range tc.wantCmd {
				if c.Command[i] != tc.wantCmd[i] {
					t.Fatalf("command %v, want %v", c.Command, tc.wantCmd)
				}
			}
		})
	}
}

// TestShipPSCommand: the parameter servers' command (--ps-command) is
// shipped and rewritten as the training command is, so that `ps 0` on a
// cluster finds its script; a script both use is shipped once.
func TestShipPSCommand(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"examples/tf/train.py", "examples/tf/train_ps.py"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &Config{Command: []string{"python3", "examples/tf/train.py"}}
	c.PS.Command = []string{"python3", "examples/tf/train_ps.py", "--port", "0"}
	notes := c.ShipCommand(dir, false)
	if strings.Join(c.PS.Command, " ") != "python3 train_ps.py --port 0" || strings.Join(c.Command, " ") != "python3 train.py" {
		t.Fatalf("commands %v and --ps-command %v, want both scripts by their names", c.Command, c.PS.Command)
	}
	if len(c.Files) != 2 || len(notes) != 2 || !strings.Contains(notes[1], "parameter server script") {
		t.Fatalf("files %v, notes %v", c.Files, notes)
	}
	same := &Config{Command: []string{"python3", "examples/tf/train.py"}}
	same.PS.Command = []string{"python3", "examples/tf/train.py", "--ps"}
	same.ShipCommand(dir, false)
	if len(same.Files) != 1 || same.PS.Command[1] != "train.py" {
		t.Fatalf("one script for both: files %v, --ps-command %v", same.Files, same.PS.Command)
	}
}
