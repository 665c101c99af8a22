package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// TestTimeoutsFromConfig: a worker built from a Config without the
// bounds gets their documented defaults, one with them keeps them, and an
// executor it launches is reaped with the configured output wait.
func TestTimeoutsFromConfig(t *testing.T) {
	if d := DefaultConfig(); d.OutputWaitDelay != 2*time.Second || d.FinalHeartbeatTimeout != 2*time.Second {
		t.Fatalf("defaults: output wait %v, final heartbeat %v", d.OutputWaitDelay, d.FinalHeartbeatTimeout)
	}
	newWorker := func(output, final time.Duration) *Worker {
		c := DefaultConfig()
		c.ID, c.Masters, c.Secret = "w1", []string{"127.0.0.1:1"}, "a-secret-long-enough-for-auth"
		c.Addr, c.Cores, c.MemoryMB = "127.0.0.1:0", 1, 256
		c.Binary, c.WorkDir, c.DisableCgroups = "/bin/sh", t.TempDir(), true
		c.OutputWaitDelay, c.FinalHeartbeatTimeout = output, final
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		w, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	if w := newWorker(0, 0); w.cfg.OutputWaitDelay != DefaultOutputWaitDelay || w.cfg.FinalHeartbeatTimeout != DefaultFinalHeartbeatTimeout {
		t.Fatalf("zero bounds: output wait %v, final heartbeat %v", w.cfg.OutputWaitDelay, w.cfg.FinalHeartbeatTimeout)
	}
	w := newWorker(3*time.Second, time.Second)
	if w.cfg.FinalHeartbeatTimeout != time.Second {
		t.Fatalf("final heartbeat bound %v, want the configured 1s", w.cfg.FinalHeartbeatTimeout)
	}
	if _, err := (&service{w: w}).Launch(context.Background(), &pb.LaunchRequest{
		WorkerId: "w1", AppId: "app", ExecutorId: "e0", Cores: 1, MemoryMb: 64, Args: []string{"-c", "exit 0"},
	}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, p := range w.procs {
		if p.cmd != nil && p.cmd.WaitDelay != 3*time.Second {
			t.Fatalf("executor %s reaped with an output wait of %v, want the configured 3s", id, p.cmd.WaitDelay)
		}
	}
	if len(w.procs) != 1 {
		t.Fatalf("%d executors launched, want 1", len(w.procs))
	}
}
