package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// TestRetriedLaunchOfAnEndedRunIsNotRepeated: a master that retries a
// launch whose answer it lost, after the executor already ran and
// exited, gets that run back; a later placement of the same executor id
// (another launch id, as a gang restart makes) starts it again.
func TestRetriedLaunchOfAnEndedRunIsNotRepeated(t *testing.T) {
	c := DefaultConfig()
	c.ID, c.Masters, c.Secret = "w1", []string{"127.0.0.1:1"}, "a-secret-long-enough-for-auth"
	c.Addr, c.Cores, c.MemoryMB = "127.0.0.1:0", 1, 256
	c.Binary, c.WorkDir, c.DisableCgroups = "/bin/sh", t.TempDir(), true
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	runs := filepath.Join(t.TempDir(), "runs")
	launch := func(launchID string) *pb.LaunchResponse {
		t.Helper()
		resp, err := (&service{w: w}).Launch(context.Background(), &pb.LaunchRequest{
			WorkerId: "w1", AppId: "app", ExecutorId: "exec-0", LaunchId: launchID, Cores: 1, MemoryMb: 64,
			Args: []string{"-c", "echo run >> " + runs},
		})
		if err != nil {
			t.Fatalf("launch %s: %v", launchID, err)
		}
		return resp
	}
	waitExited := func() {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, func() error {
			w.mu.Lock()
			defer w.mu.Unlock()
			if p := w.procs["app/exec-0"]; p == nil || !p.exited {
				return errors.New("executor exec-0 has not exited")
			}
			return nil
		})
	}
	countRuns := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "run")
	}

	first := launch("req-1")
	waitExited()
	again := launch("req-1")
	if again.GetPid() != first.GetPid() {
		t.Fatalf("the retried launch answered pid %d, want the ended run's %d", again.GetPid(), first.GetPid())
	}
	if n := countRuns(); n != 1 {
		t.Fatalf("the executor ran %d times after a retried launch, want 1", n)
	}
	launch("req-2")
	waitExited()
	if n := countRuns(); n != 2 {
		t.Fatalf("the executor ran %d times after a new placement, want 2", n)
	}
}
