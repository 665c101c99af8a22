package driver

import (
	"slices"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// waitingNewcomer is growingRoster's gang in a job with input, with a
// newcomer, exec-n1 on host h9, registered and waiting for an epoch's end.
func waitingNewcomer(t *testing.T, grows *[]string) (*roster, *member) {
	t.Helper()
	g := growingRoster(t, grows)
	g.growAtEpochs = true
	m := g.addNewcomer("exec-n1")
	register(t, g, "exec-n1", "h9")
	return g, m
}

// TestNewcomerWithInputJoinsAtAnEpochsEnd: in a job with input, a
// newcomer that registers is not yet a rank: the running ranks' membership
// stays as it was until the driver takes it at an epoch's end
// (grewAtBoundary), which appends it as rank 3 in a membership of four.
// Without the wait, its registration grew the gang at once, while the
// running feeds were mid-epoch on the old plan.
func TestNewcomerWithInputJoinsAtAnEpochsEnd(t *testing.T) {
	var grows []string
	g, m := waitingNewcomer(t, &grows)
	if !closed(m.signedIn) || closed(m.joined) || len(grows) != 0 || g.currentMembership().GetVersion() != 1 {
		t.Fatalf("a registered newcomer of a job with input joined at once (signed in %v, joined %v, grows %q, membership %v)",
			closed(m.signedIn), closed(m.joined), grows, g.currentMembership())
	}
	if _, err := g.grewAtBoundary(m, []string{"exec-0", "exec-2"}); err == nil {
		t.Fatal("the newcomer joined a gang whose ranks changed since it was planned")
	}
	got, err := g.grewAtBoundary(m, g.ranks())
	if err != nil {
		t.Fatal(err)
	}
	if got.GetVersion() != 2 || len(got.GetPeers()) != 4 || got.GetJoined() != 3 || !closed(m.joined) || m.rank != 3 {
		t.Fatalf("membership %v after the epoch's end (rank %d, joined %v); want version 2 of 4 with rank 3 joined", got, m.rank, closed(m.joined))
	}
}

// TestNewcomerLostWhileWaitingIsAbandoned: a newcomer's executor that ends
// while it waits for an epoch's end is abandoned: no failure, no shrink,
// the membership as it was, and the gang may take another.
func TestNewcomerLostWhileWaitingIsAbandoned(t *testing.T) {
	var grows []string
	g, m := waitingNewcomer(t, &grows)
	g.executorGone(Event{ExecutorID: "exec-n1", Kind: ExecutorLost})
	if !closed(m.abandoned) || closed(g.failed) || g.currentMembership().GetVersion() != 1 ||
		!slices.Equal(g.ranks(), []string{"exec-0", "exec-2", "exec-3"}) {
		t.Fatalf("abandoned %v, failed %v (%v), membership %v, ranks %v; want the newcomer abandoned and the gang as it was",
			closed(m.abandoned), closed(g.failed), g.err(), g.currentMembership(), g.ranks())
	}
	if _, err := g.grewAtBoundary(m, g.ranks()); err == nil {
		t.Fatal("an abandoned newcomer joined")
	}
	if g.addNewcomer("exec-n2") == nil {
		t.Fatal("the gang took no newcomer after abandoning one")
	}
}

// TestNoNewcomerInTheLastEpoch: a newcomer abandoned because the job is
// in its last epoch is the last started: none could be fed.
func TestNoNewcomerInTheLastEpoch(t *testing.T) {
	var grows []string
	g, m := waitingNewcomer(t, &grows)
	g.abandonNewcomer(m, true)
	if !closed(m.abandoned) || g.addNewcomer("exec-n2") != nil {
		t.Fatal("the gang took another newcomer in its last epoch")
	}
}

// TestLossAfterGrowingWithInputRestartsTheGang: once a newcomer joined at
// an epoch's end, the feeds follow the bigger world's plan, from which
// the driver cannot deal a lost rank's rest (it deals from the
// generation's): a later loss fails the generation, which restarts
// smaller at its checkpoint, rather than going on with rows lost or fed
// twice.
func TestLossAfterGrowingWithInputRestartsTheGang(t *testing.T) {
	var grows []string
	g, m := waitingNewcomer(t, &grows)
	g.mu.Lock()
	// As if it had started small, with restarts left.
	g.shrinkOnce, g.shrinks, g.growing = true, 0, nil
	g.budget = func(*lossError) (string, []string, bool) { return "", nil, true }
	g.mu.Unlock()
	if _, err := g.grewAtBoundary(m, g.ranks()); err != nil {
		t.Fatal(err)
	}
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-2", Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	if !closed(g.failed) {
		t.Fatalf("a rank lost after the gang grew at an epoch's end was gone on without in place (ranks %v)", g.ranks())
	}
}
