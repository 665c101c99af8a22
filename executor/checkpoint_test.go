package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// startCheckpointService runs the service on a socket in a fresh directory
// and returns an HTTP client that reaches it.
func startCheckpointService(t *testing.T, res *fsys.Resolver) *http.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "ckpt.sock")
	s, err := newCheckpointService(sock, res, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return s.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Error(err)
		}
		s.Close()
	})
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v, mode %v; want private", sock, err, fi.Mode())
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func ckptURL(dir, name string) string {
	return "http://executor/checkpoint?" + url.Values{"dir": {dir}, "name": {name}}.Encode()
}

func put(t *testing.T, c *http.Client, dir, name string, body io.Reader) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, ckptURL(dir, name), body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func get(t *testing.T, c *http.Client, dir, name string) (int, []byte) {
	t.Helper()
	resp, err := c.Get(ckptURL(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// brokenBody yields some bytes and then fails, as an upload cut off by a
// process killed mid-save does.
type brokenBody struct{ n int }

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errors.New("cut off")
	}
	n := min(len(p), b.n)
	for i := range p[:n] {
		p[i] = 'x'
	}
	b.n -= n
	return n, nil
}

// The executor saves and loads a process's checkpoints on HDFS (and
// local files), atomically: an upload cut off midway leaves the previous
// checkpoint whole.
func TestCheckpointService(t *testing.T) {
	c := hdfstest.NewTestCluster(t, hdfstest.Config{BlockSize: 64 << 10})
	res := fsys.NewResolver(fsys.Options{User: c.Superuser()})
	defer res.Close()
	client := startCheckpointService(t, res)
	for _, dir := range []string{"hdfs://" + c.Addr() + "/user/me/ckpt", t.TempDir() + "/ckpt"} {
		t.Run(map[bool]string{true: "hdfs", false: "local"}[strings.HasPrefix(dir, "hdfs:")], func(t *testing.T) {
			if code, _ := get(t, client, dir, "model.pt"); code != http.StatusNotFound {
				t.Fatalf("GET of a missing checkpoint: %d, want 404", code)
			}
			model := bytes.Repeat([]byte("weights!"), 50_000) // 400 KB: several blocks
			if code := put(t, client, dir, "model.pt", bytes.NewReader(model)); code != http.StatusNoContent {
				t.Fatalf("PUT: %d", code)
			}
			if code, got := get(t, client, dir, "model.pt"); code != http.StatusOK || !bytes.Equal(got, model) {
				t.Fatalf("GET: %d, %d bytes; want the %d bytes saved", code, len(got), len(model))
			}
			// A save cut off midway: the old checkpoint stays.
			req, _ := http.NewRequest(http.MethodPut, ckptURL(dir, "model.pt"), &brokenBody{n: 300_000})
			req.ContentLength = 400_000
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusNoContent {
					t.Fatal("a cut-off upload was accepted")
				}
			}
			// Wait for the service to have seen the cut: the next request
			// uses a fresh connection.
			testutil.WaitFor(t, 10*time.Second, func() error {
				if code, got := get(t, client, dir, "model.pt"); code != http.StatusOK || !bytes.Equal(got, model) {
					return fmt.Errorf("after a cut-off save: %d, %d bytes; want the old checkpoint", code, len(got))
				}
				return nil
			})
		})
	}
	for _, bad := range []string{"", ".hidden", "a/b"} {
		if code := put(t, client, t.TempDir(), bad, strings.NewReader("x")); code != http.StatusBadRequest {
			t.Errorf("PUT name %q: %d, want 400", bad, code)
		}
	}
}

// TestCheckpointServiceStoresResumeRecords: PUT /resume stores a rank's
// resume record where the driver looks for it; a malformed record or name
// is refused.
func TestCheckpointServiceStoresResumeRecords(t *testing.T) {
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	hc := startCheckpointService(t, res)
	dir := t.TempDir()
	for _, tt := range []struct {
		name, body string
		want       int
	}{
		{"good", `{"checkpoint":"ckpt-4","step":4,"rank":1,"world_size":2,"feed":{"epoch":0,"batches":4}}`, http.StatusNoContent},
		{"hidden name", `{"checkpoint":".x","step":4,"rank":1,"world_size":2}`, http.StatusInternalServerError},
		{"not json", `{`, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPut, "http://executor/resume?"+url.Values{"dir": {dir}}.Encode(), strings.NewReader(tt.body))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	b, err := os.ReadFile(filepath.Join(dir, ".spindle-resume", "ckpt-4", "rank-1.json"))
	if err != nil || !bytes.Contains(b, []byte(`"batches":4`)) {
		t.Fatalf("record: %s, %v", b, err)
	}
}

// TestCheckpointServicePrunes: POST /prune deletes, for a process, the
// complete checkpoints beyond the newest keep once the one it names is
// complete, on HDFS and local directories; bad requests are refused.
func TestCheckpointServicePrunes(t *testing.T) {
	c := hdfstest.NewTestCluster(t, hdfstest.Config{BlockSize: 64 << 10})
	res := fsys.NewResolver(fsys.Options{User: c.Superuser()})
	defer res.Close()
	hc := startCheckpointService(t, res)
	prune := func(dir, checkpoint, keep string) (int, string) {
		t.Helper()
		u := "http://executor/prune?" + url.Values{"dir": {dir}, "checkpoint": {checkpoint}, "prefix": {"ckpt"}, "keep": {keep}}.Encode()
		resp, err := hc.Post(u, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, dir := range []string{"hdfs://" + c.Addr() + "/user/me/pruned", t.TempDir() + "/pruned"} {
		t.Run(map[bool]string{true: "hdfs", false: "local"}[strings.HasPrefix(dir, "hdfs:")], func(t *testing.T) {
			for step := 1; step <= 3; step++ {
				name := fmt.Sprintf("ckpt-%d", step)
				if code := put(t, hc, dir, name, strings.NewReader(name)); code != http.StatusNoContent {
					t.Fatalf("PUT %s: %d", name, code)
				}
				rec := fmt.Sprintf(`{"checkpoint":%q,"step":%d,"rank":0,"world_size":1,"files":[%q],"time":%q}`,
					name, step, name, t0.Add(time.Duration(step)*time.Second).Format(time.RFC3339))
				req, _ := http.NewRequest(http.MethodPut, "http://executor/resume?"+url.Values{"dir": {dir}}.Encode(), strings.NewReader(rec))
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if code, body := prune(dir, "ckpt-3", "1"); code != http.StatusOK || body != `["ckpt-1","ckpt-2"]` {
				t.Fatalf("prune: %d %s", code, body)
			}
			for step, want := range map[int]int{1: http.StatusNotFound, 2: http.StatusNotFound, 3: http.StatusOK} {
				if code, _ := get(t, hc, dir, fmt.Sprintf("ckpt-%d", step)); code != want {
					t.Errorf("GET ckpt-%d after the prune: %d, want %d", step, code, want)
				}
			}
			if code, body := prune(dir, "ckpt-3", "1"); code != http.StatusOK || body != `[]` {
				t.Fatalf("second prune: %d %s", code, body)
			}
		})
	}
	for _, bad := range [][2]string{{"ckpt-3", "0"}, {"ckpt-3", "x"}, {".x", "1"}} {
		if code, _ := prune(t.TempDir(), bad[0], bad[1]); code != http.StatusBadRequest {
			t.Errorf("prune checkpoint %s keep %s: %d, want 400", bad[0], bad[1], code)
		}
	}
}
