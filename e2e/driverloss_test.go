package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestKilledSubmitLeavesNothingBehind: a spindle submit killed with
// SIGKILL (no chance to stop anything) leaves no executor, no training
// process and none of their children running.
func TestKilledSubmitLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	pids := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	// Each rank records its own pid, its executor's (its parent) and a
	// child's, then waits.
	script := `echo $$ > ` + pids + `/rank-$SPINDLE_RANK.pid; echo $PPID > ` + pids + `/exec-$SPINDLE_RANK.pid; ` +
		`sleep 300 & echo $! > ` + pids + `/child-$SPINDLE_RANK.pid; wait`
	cmd := exec.CommandContext(ctx, spindleBin, submitArgs("--num-executors", "2", "--conf", "spindle.ui.enabled=false",
		"--", "/bin/sh", "-c", script)...)
	cmd.Dir = pids
	cmd.Env = testEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, testutil.Holds("both ranks and their children to start", func() bool {
		files, _ := filepath.Glob(filepath.Join(pids, "child-*.pid"))
		return len(files) == 2 && len(readPids(t, pids)) == 6
	}))

	running := readPids(t, pids)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// Executors hear of their driver's death at once (a parent-death
	// signal), well inside the heartbeat timeout they would otherwise take.
	testutil.WaitFor(t, 15*time.Second, testutil.Holds("every executor, rank and child to be gone", func() bool {
		for _, p := range running {
			if alive(p) {
				return false
			}
		}
		return true
	}))

}
