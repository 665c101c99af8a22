package worker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// fakeCgroupRoot lays out the files of a cgroup v2 mount in a directory.
// The kernel's behaviour (limits, moving processes) is not there: these
// tests check what the worker writes, the host's real cgroups are
// exercised wherever the tests run on a cgroup v2 host.
func fakeCgroupRoot(t *testing.T, controllers string) string {
	root := t.TempDir()
	jobs := filepath.Join(root, "jobs")
	if err := os.MkdirAll(jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, jobs} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.controllers"), []byte(controllers+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestSetupCgroups(t *testing.T) {
	tests := []struct {
		name        string
		root        func(t *testing.T) string
		parent      string
		wantErrText string
	}{
		{"no cgroup v2", func(t *testing.T) string { return t.TempDir() }, "/jobs", "cgroup v2 is not mounted"},
		{"controllers not delegated", func(t *testing.T) string { return fakeCgroupRoot(t, "cpu io") }, "/jobs", "does not offer the cpu and memory controllers"},
		{"no such parent", func(t *testing.T) string { return fakeCgroupRoot(t, "cpu memory") }, "/elsewhere", "read controllers of cgroup"},
		{"delegated", func(t *testing.T) string { return fakeCgroupRoot(t, "cpuset cpu io memory pids") }, "/jobs", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.root(t)
			cg, err := setupCgroups(root, tc.parent, "w1")
			if tc.wantErrText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("got %v, want an error saying %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(root, "jobs", "cgroup.subtree_control")); got != "+cpu +memory" {
				t.Fatalf("parent subtree_control %q", got)
			}
			dir, err := cg.create("app-1.exec-0", 2, 512)
			if err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(dir, "cpu.max")); got != "200000 100000" {
				t.Errorf("cpu.max %q, want 2 cores' worth", got)
			}
			if got := readFile(t, filepath.Join(dir, "memory.max")); got != strconv.Itoa(512<<20) {
				t.Errorf("memory.max %q, want 512 MiB", got)
			}
			if err := removeCgroup(dir); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOwnCgroup(t *testing.T) {
	f := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(f, []byte("1:cpu:/x\n0::/user.slice/session-3.scope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ownCgroup(f); err != nil || got != "/user.slice/session-3.scope" {
		t.Fatalf("ownCgroup: %q %v", got, err)
	}
	if err := os.WriteFile(f, []byte("1:cpu:/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ownCgroup(f); err == nil {
		t.Fatal("v1-only cgroup file accepted")
	}
}

// A launch on a worker with cgroups puts the executor's pid into its
// cgroup with the limits set.
func TestLaunchIntoCgroup(t *testing.T) {
	root := fakeCgroupRoot(t, "cpu memory")
	c := DefaultConfig()
	c.ID, c.Masters, c.Secret = "w1", []string{"127.0.0.1:1"}, "a-secret-long-enough-for-auth"
	c.Addr, c.Cores, c.MemoryMB, c.GPUs = "127.0.0.1:0", 2, 1024, 0
	c.Binary, c.WorkDir = "/bin/sh", t.TempDir()
	c.CgroupRoot, c.CgroupParent = root, "/jobs"
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.CgroupsEnabled() {
		t.Fatal("cgroups not enabled on a delegated tree")
	}
	gate := filepath.Join(t.TempDir(), "gate")
	resp, err := (&service{w: w}).Launch(context.Background(), &pb.LaunchRequest{
		WorkerId: "w1", AppId: "app", ExecutorId: "e0", Cores: 1, MemoryMb: 256,
		Args: []string{"-c", "while [ ! -e " + gate + " ]; do sleep 0.01; done"},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	p := w.procs["app/e0"]
	w.mu.Unlock()
	cg := p.cgroup
	if got := readFile(t, filepath.Join(cg, "memory.max")); got != strconv.Itoa(256<<20) {
		t.Errorf("memory.max %q", got)
	}
	if got := readFile(t, filepath.Join(cg, "cgroup.procs")); got != strconv.Itoa(int(resp.GetPid())) {
		t.Errorf("cgroup.procs %q, want the executor's pid %d", got, resp.GetPid())
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(testutil.Scale(10 * time.Second)):
		t.Fatal("executor did not exit")
	}
	w.reapers.Wait()
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind: %v", cg, err)
	}
}
