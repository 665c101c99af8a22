package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestStoppedLeaderDoesNotBlameItsWorkers: a leader whose process does
// not run for three worker timeouts (stopped here; starved on a loaded
// host in the run that found it, where both workers were declared lost
// at once and a running job failed) heard nobody in that time. Resumed,
// it says its checks were held up and keeps its worker alive, rather than
// declaring it lost for a silence that was the leader's own. The master
// is alone, so no other takes the lead meanwhile.
func TestStoppedLeaderDoesNotBlameItsWorkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr, raft := testaddr.Free(t), testaddr.Free(t)
	mlog := filepath.Join(dir, "m1.log")
	m := &proc{name: "m1", log: mlog, args: append([]string{"master", "--id", "m1", "--addr", addr,
		"--raft-addr", raft, "--peers", fmt.Sprintf("m1=%s@%s", raft, addr), "--data-dir", filepath.Join(dir, "m1")}, fastMaster()...)}
	m.start(t)
	defer m.kill()
	w := &proc{name: "w1", log: filepath.Join(dir, "w1.log"), args: []string{"worker", "--masters", addr, "--id", "w1",
		"--addr", "127.0.0.1:0", "--advertise-host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--gpus", "0",
		"--work-dir", filepath.Join(dir, "w1"), "--conf", "spindle.worker.heartbeatInterval=200ms"}}
	w.start(t)
	defer w.kill()
	status := []string{"status", "--master", "spindle://" + addr}
	aliveW1 := func() error {
		if out, code := spindleCmd(t, status...); code != 0 || !strings.Contains(out, "w1") || strings.Contains(out, "lost") {
			return fmt.Errorf("spindle status (exit %d) does not show w1 alive:\n%s", code, out)
		}
		return nil
	}
	testutil.WaitFor(t, 30*time.Second, aliveW1)

	// fastMaster's worker timeout, three times over.
	stop := 3 * testutil.Scale(1500*time.Millisecond)
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stop) // the stall under test, not synchronisation
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	logged := func() string { b, _ := os.ReadFile(mlog); return string(b) }
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("word of the held-up checks in the master's log", func() bool {
		return strings.Contains(logged(), "liveness checks were held up")
	}))
	if err := aliveW1(); err != nil {
		t.Fatalf("%v\n--- master log\n%s", err, logged())
	}
	if strings.Contains(logged(), "worker lost") {
		t.Fatalf("the resumed leader declared its worker lost:\n%s", logged())
	}
}
