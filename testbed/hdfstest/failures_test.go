package hdfstest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
)

func TestReadContinuesWhenDataNodeDies(t *testing.T) {
	c := testCluster(t, Config{})
	cl := connect(t, c, c.Superuser())
	data := randomBytes(4*testBlockSize, 4)
	writeFile(t, cl, "/f", data)
	blocks, err := c.Blocks("/f")
	if err != nil {
		t.Fatal(err)
	}

	f, err := cl.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Read into the middle of block 1, so a stream to its first replica is open.
	mid := testBlockSize + testBlockSize/3
	got := make([]byte, len(data))
	if _, err := io.ReadFull(f, got[:mid]); err != nil {
		t.Fatal(err)
	}
	victim := blocks[1].DataNodes[0]
	if err := c.KillDataNode(victim); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(f, got[mid:]); err != nil {
		t.Fatalf("read after killing datanode %d: %v", victim, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs after failover")
	}
	after, _ := c.Blocks("/f")
	for _, b := range after {
		for _, dn := range b.DataNodes {
			if dn == victim {
				t.Fatalf("namenode still hands out dead datanode %d for block %d", victim, b.ID)
			}
		}
	}

	// New files go to the live datanodes only; a restart brings the dead
	// one's replicas back.
	writeFile(t, cl, "/g", data[:testBlockSize])
	if err := c.RestartDataNode(victim); err != nil {
		t.Fatal(err)
	}
	back, _ := c.Blocks("/f")
	if len(back[1].DataNodes) != 3 {
		t.Fatalf("after restart block 1 has replicas on %v, want 3", back[1].DataNodes)
	}
	if got := readFile(t, cl, "/g"); !bytes.Equal(got, data[:testBlockSize]) {
		t.Fatal("file written while a datanode was down reads back wrong")
	}
}

func TestCorruptReplicaFailsOver(t *testing.T) {
	c := testCluster(t, Config{})
	cl := connect(t, c, c.Superuser())
	data := randomBytes(3*testBlockSize, 5)
	writeFile(t, cl, "/f", data)
	blocks, _ := c.Blocks("/f")
	bad := blocks[1].DataNodes[0] // the replica a reader tries first
	if err := c.CorruptBlock("/f", 1, bad); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, cl, "/f"); !bytes.Equal(got, data) {
		t.Fatal("read of a file with one corrupt replica returned wrong bytes")
	}
	if n := c.Stats().ChecksumErrors; n == 0 {
		t.Fatal("no checksum error was detected")
	}
	after, _ := c.Blocks("/f")
	for _, dn := range after[1].DataNodes {
		if dn == bad {
			t.Fatalf("corrupt replica on datanode %d is still handed out", bad)
		}
	}
}

func TestCorruptBlockEveryReplica(t *testing.T) {
	for _, tc := range []struct {
		name string
		skip bool // leave verification to the client
		read int  // read size; the client verifies small reads itself
	}{
		{"datanode verifies", false, 32 << 10},
		{"client verifies", true, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster(t, Config{SkipReadVerification: tc.skip})
			cl := connect(t, c, c.Superuser())
			data := randomBytes(2*testBlockSize, 6)
			writeFile(t, cl, "/f", data)
			if err := c.CorruptBlock("/f", 0); err != nil {
				t.Fatal(err)
			}
			f, err := cl.Open("/f")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, tc.read)
			var rerr error
			for off := int64(0); off < testBlockSize && rerr == nil; off += int64(tc.read) {
				_, rerr = f.ReadAt(buf, off)
			}
			t.Logf("error: %v", rerr)
			if rerr == nil || !strings.Contains(strings.ToLower(rerr.Error()), "checksum") {
				t.Fatalf("reading a block corrupt on every replica: %v, want a checksum error", rerr)
			}
		})
	}
}

func TestNamenodeUnreachable(t *testing.T) {
	addr := testaddr.Refusing(t)
	_, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{addr}, User: "u"})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("connect to a closed port: %v", err)
	}
}

func TestHAFailover(t *testing.T) {
	c := testCluster(t, Config{NameNodes: 2})
	if !strings.HasPrefix(c.URI(), "hdfs://spindle") {
		t.Fatalf("URI %s, want the nameservice", c.URI())
	}
	cl := connect(t, c, c.Superuser())
	writeFile(t, cl, "/before", []byte("x"))
	if err := c.Failover(1); err != nil {
		t.Fatal(err)
	}
	writeFile(t, cl, "/after", []byte("y"))
	if got := readFile(t, cl, "/before"); string(got) != "x" {
		t.Fatalf("read after failover: %q", got)
	}
	if n := c.Stats().NameNodeCalls; n["getFileInfo"] == 0 {
		t.Fatalf("no calls counted: %v", n)
	}
}

func TestRestartKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	c, err := Start(ctx, Config{Dir: dir, BlockSize: testBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{c.Addr()}, User: c.Superuser()})
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(2*testBlockSize+5, 7)
	writeFile(t, cl, "/keep", data)
	writeFile(t, cl, "/gone", data[:10])
	if err := cl.Remove("/gone"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c2, err := Start(ctx, Config{Dir: dir, BlockSize: testBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	cl2 := connect(t, c2, c2.Superuser())
	if got := readFile(t, cl2, "/keep"); !bytes.Equal(got, data) {
		t.Fatal("file differs after restart")
	}
	if _, err := cl2.Stat("/gone"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("deleted file after restart: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no dir", Config{}, "Dir is required"},
		{"block size", Config{Dir: "x", BlockSize: 1000}, "BlockSize 1000"},
		{"replication", Config{Dir: "x", DataNodes: 2, Replication: 3}, "Replication 3"},
		{"host", Config{Dir: "x", Host: "localhost"}, `Host "localhost"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.withDefaults().Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWriteFailsWhenPipelineBreaks(t *testing.T) {
	for _, tc := range []struct {
		name string
		pos  int // which datanode of the pipeline dies
	}{{"head", 0}, {"downstream", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster(t, Config{DataNodes: 4})
			cl := connect(t, c, c.Superuser())
			w, err := cl.Create("/w")
			if err != nil {
				t.Fatal(err)
			}
			chunk := randomBytes(64<<10/4, 8)
			if _, err := w.Write(chunk); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			blocks, err := c.Blocks("/w")
			if err != nil || len(blocks) != 1 || len(blocks[0].Pipeline) != 3 {
				t.Fatalf("blocks %+v, %v", blocks, err)
			}
			if err := c.KillDataNode(blocks[0].Pipeline[tc.pos]); err != nil {
				t.Fatal(err)
			}
			// The client cannot recover a pipeline; it must fail, not hang.
			var werr error
			for i := 0; i < 8 && werr == nil; i++ {
				_, werr = w.Write(chunk)
			}
			if cerr := w.Close(); werr == nil {
				werr = cerr
			}
			if werr == nil {
				t.Fatal("write through a broken pipeline succeeded")
			}
			t.Logf("write error: %v", werr)
			// The cluster still serves new files on the remaining datanodes.
			data := randomBytes(3*testBlockSize, 9)
			writeFile(t, cl, "/after", data)
			if got := readFile(t, cl, "/after"); !bytes.Equal(got, data) {
				t.Fatal("file written after the failure reads back wrong")
			}
		})
	}
}
