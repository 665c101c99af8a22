package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

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
	c := startSmallCluster(t, nil)
	m := c.masters[0]

	// fastMaster's worker timeout, three times over.
	stop := 3 * testutil.Scale(1500*time.Millisecond)
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stop) // the stall under test, not synchronisation
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	logged := func() string { b, _ := os.ReadFile(m.log); return string(b) }
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("word of the held-up checks in the master's log", func() bool {
		return strings.Contains(logged(), "liveness checks were held up")
	}))
	st, err := c.status()
	if err != nil {
		t.Fatal(err)
	}
	if n := aliveWorkers(st); n != 1 || strings.Contains(logged(), "worker lost") {
		t.Fatalf("the resumed leader declared its worker lost (%d alive)", n)
	}
}
