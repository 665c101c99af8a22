package driver

import (
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// replacingRoster is a registered gang of three workers that replaces a
// lost one, with budget restarts.
func replacingRoster(t *testing.T, budget int) *roster {
	t.Helper()
	g := newRoster([]string{"exec-0", "exec-1", "exec-2"})
	g.replaceWorkers = true
	g.budget = func(*lossError) (string, []string, bool) {
		if budget == 0 {
			return "", nil, false
		}
		budget--
		return "restart 1 of 1", nil, true
	}
	for i := range 3 {
		register(t, g, "exec-"+string(rune('0'+i)), "h")
	}
	return g
}

// TestLostWorkerIsReplacedAlone: a worker killed under a gang that
// replaces workers leaves the job running; its replacement takes its rank
// and its place in the spec, and the job ends when every rank's last
// process did.
func TestLostWorkerIsReplacedAlone(t *testing.T) {
	g := replacingRoster(t, 1)
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	if closed(g.failed) {
		t.Fatalf("the job failed: %v", g.err())
	}
	lost := <-g.lost
	m := g.addWorkerReplacement(lost)
	if m == nil || m.rank != 1 || m.replacement != 1 {
		t.Fatalf("replacement %+v, want rank 1, replacement 1", m)
	}
	register(t, g, m.id, "h2")
	if !closed(m.joined) || g.peerList()[1].GetExecutorId() != m.id || g.peerList()[1].GetHost() != "h2" {
		t.Fatalf("the replacement is not rank 1 of the spec: %v", g.peerList())
	}
	for _, id := range []string{"exec-0", m.id, "exec-2"} {
		if err := g.exit(&driverpb.ExitReport{ExecutorId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if !closed(g.succeeded) || closed(g.failed) {
		t.Fatalf("the job did not succeed: %v", g.err())
	}
}

// TestReplacementFallsBackToARestart: a second rank failing while one is
// being replaced (the survivors were not healthy), a replacement that
// could not start, and no restarts left each fail the generation, which
// the restart policy then restarts whole, and the error says why.
func TestReplacementFallsBackToARestart(t *testing.T) {
	t.Run("another rank fails", func(t *testing.T) {
		g := replacingRoster(t, 3)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"})
		g.executorGone(Event{Kind: ExecutorExited, ExecutorID: "exec-2", ExitCode: 1})
		if !closed(g.failed) || !strings.Contains(g.err().Error(), "while rank 1 (host h, executor exec-1) was being replaced alone") {
			t.Fatalf("failure %v, want one naming the replacement under way", g.err())
		}
	})
	t.Run("another rank fails soon after the replacement registered", func(t *testing.T) {
		g := replacingRoster(t, 3)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"})
		register(t, g, g.addWorkerReplacement(<-g.lost).id, "h")
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-0", Signal: "SIGKILL"})
		if !closed(g.failed) || !strings.Contains(g.err().Error(), "rank 0 (host h, executor exec-0): training process was killed by signal SIGKILL (while rank 1") {
			t.Fatalf("failure %v, want rank 0's, during rank 1's replacement", g.err())
		}
	})
	t.Run("no executor", func(t *testing.T) {
		g := replacingRoster(t, 3)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"})
		lost := <-g.lost
		m := g.addWorkerReplacement(lost)
		g.replaceFailed(lost, m, "no executor was started for it: no room")
		if !closed(g.failed) || !strings.Contains(g.err().Error(), "killed by signal SIGKILL; it could not be replaced alone (no executor was started for it: no room)") {
			t.Fatalf("failure %v, want the loss and why it was not replaced", g.err())
		}
		if failedRankOf(t, g.err()) != 1 {
			t.Errorf("the failure is not laid on rank 1")
		}
	})
	t.Run("no restarts left", func(t *testing.T) {
		g := replacingRoster(t, 0)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"})
		if !closed(g.failed) {
			t.Fatal("a loss with no restarts left did not fail the generation")
		}
	})
}

// failedRankOf is the rank err lays the failure on, or -1.
func failedRankOf(t *testing.T, err error) int {
	t.Helper()
	f, ok := FailedRank(err)
	if !ok {
		return -1
	}
	return f.Rank
}
