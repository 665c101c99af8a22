package driver

import (
	"fmt"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// TestFailedRankNamesRankAndStderr: a job's failure, however wrapped, says
// which rank failed, where, how, and the last lines of its stderr, for
// programs that read them apart from the message (the Python API).
func TestFailedRankNamesRankAndStderr(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1"})
	register(t, g, "exec-0", "h0")
	register(t, g, "exec-1", "h1")
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", ExitCode: 3, StderrTail: "Traceback\nValueError: bad"}); err != nil {
		t.Fatal(err)
	}
	f, ok := FailedRank(fmt.Errorf("run job: %w", g.err()))
	if !ok {
		t.Fatalf("FailedRank(%v) names no rank", g.err())
	}
	want := RankFailure{Rank: 1, Host: "h1", Executor: "exec-1", ExitCode: 3, StderrTail: "Traceback\nValueError: bad"}
	if f != want {
		t.Errorf("FailedRank = %+v, want %+v", f, want)
	}
	if _, ok := FailedRank(ErrTimedOut); ok {
		t.Error("a timeout names a rank")
	}
}

// TestFailedRankBeforeRegistering: an executor that failed before it got a
// rank is named by its executor id, with rank -1.
func TestFailedRankBeforeRegistering(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1"})
	register(t, g, "exec-0", "h0")
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Error: "start python3: no such file"}); err != nil {
		t.Fatal(err)
	}
	f, ok := FailedRank(g.err())
	if !ok || f.Rank != -1 || f.Executor != "exec-1" {
		t.Errorf("FailedRank = %+v, %v; want rank -1 of exec-1", f, ok)
	}
}
