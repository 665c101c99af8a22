package task

import (
	"context"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestRejoinShrinksInPlace: rank 1 of 4 goes away and the job goes on
// without it; the survivors' allreduce names it, they wait in Env.Rejoin
// until the membership file lists the three of them (version 1, the epoch
// one more), form a world of 3 on their own ports, renumbered in the
// membership's order, and CatchUp hands everyone the state of the
// survivor that got furthest.
func TestRejoinShrinksInPlace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	comms, peers, env := joinAll(ctx, t, 4)
	comms[1].Close()

	old := []int{0, 2, 3}
	shrunk := make([]*collective.Comm, 3)
	rejoined := awaitRejoin(ctx, env, comms, old, 1, shrunk)
	writeMembership(t, env.MembershipFile, Membership{Version: 1, Peers: []string{peers[0], peers[2], peers[3]},
		Incarnations: []uint32{1, 0, 0}, Left: []int{1}})
	if err := rejoined(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range shrunk {
			c.Close()
		}
	}()

	// Old rank 3, now rank 2, completed the step that failed on the others.
	steps := []int64{5, 5, 6}
	got := make([]int64, 3)
	states := make([][]float64, 3)
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range shrunk {
		if c.Rank() != i || c.WorldSize() != 3 {
			t.Fatalf("old rank %d is rank %d of %d, want rank %d of 3", old[i], c.Rank(), c.WorldSize(), i)
		}
		states[i] = []float64{float64(old[i])}
		g.Go(func() (err error) { got[i], err = CatchUp(gctx, c, steps[i], states[i]); return err })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := range shrunk {
		if got[i] != 6 || !slices.Equal(states[i], []float64{3}) {
			t.Errorf("old rank %d caught up to step %d with %v, want old rank 3's step 6 and state [3]", old[i], got[i], states[i])
		}
	}
}

// TestCommShrinksWhileJoining: rank 2 of 3 is lost before the
// communicator formed and the job goes on without it; once the membership
// lists the two survivors (version 1, the epoch one more), they join the
// world of 2 instead of waiting for rank 2, and allreduce in it.
func TestCommShrinksWhileJoining(t *testing.T) {
	ctx, path, peers, joins, comms := rank2LostWhileJoining(t)
	writeMembership(t, path, Membership{Version: 1, Peers: peers[:2], Incarnations: []uint32{1, 0}, Joined: -1, Left: []int{2}})
	collectJoins(t, joins, comms)
	g, gctx := errgroup.WithContext(ctx)
	sums := make([][]float64, 2)
	for r := range 2 {
		if comms[r].Rank() != r || comms[r].WorldSize() != 2 {
			t.Fatalf("rank %d joined as rank %d of %d, want rank %d of 2", r, comms[r].Rank(), comms[r].WorldSize(), r)
		}
		sums[r] = []float64{1}
		g.Go(func() error { return collective.AllReduce(gctx, comms[r], sums[r], collective.Sum) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for r, s := range sums {
		if s[0] != 2 {
			t.Errorf("rank %d's ones summed to %v in a world of 2", r, s[0])
		}
	}
}
