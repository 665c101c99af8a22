package driver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// boundaryAt is Boundary's answer.
type boundaryAt struct {
	epoch int
	err   error
}

// askBoundary waits, in the background, for the next epoch end a
// newcomer may join at.
func askBoundary(ctx context.Context, g *epochGate) <-chan boundaryAt {
	ch := make(chan boundaryAt, 1)
	go func() {
		e, err := g.Boundary(ctx)
		ch <- boundaryAt{e, err}
	}()
	return ch
}

// TestGateGrowsAtAnEpochsEnd: while a newcomer waits to join, the open
// epoch does not end when every running feed holds its end; the gate
// names that epoch, and Grow answers each running feed with its share of
// the bigger world's plan and the bigger membership. The newcomer is then
// a member from the next epoch on: that epoch ends only when its feed
// holds the end too. Without the hold, epoch 0 would end with plain ends
// (no plan, no membership) before the newcomer could join.
func TestGateGrowsAtAnEpochsEnd(t *testing.T) {
	ctx := t.Context()
	g := newEpochGate(3, []string{"a", "b", "c"}, make(chan struct{}))
	// Bounded: a gate that let epoch 0 end would keep the newcomer
	// waiting for a later end.
	bctx, cancel := context.WithTimeout(ctx, testutil.Scale(20*time.Second))
	defer cancel()
	at := askBoundary(bctx, g)
	waitGate(t, g, "the newcomer to wait", func() bool { return g.growing })
	ends := map[string]<-chan held{}
	for _, id := range []string{"a", "b", "c"} {
		ends[id] = askHeld(ctx, g, id, 0)
	}
	b := <-at
	if b.err != nil || b.epoch != 0 {
		t.Fatalf("Boundary = %d, %v; want epoch 0", b.epoch, b.err)
	}
	if g.open() != 0 {
		t.Fatalf("epoch 0 ended while the newcomer waited to join at its end")
	}
	m := &driverpb.Membership{Version: 2}
	next := map[string]*driverpb.FeedPlan{}
	for j, id := range []string{"a", "b", "c"} {
		next[id] = &driverpb.FeedPlan{Rank: int32(j)}
	}
	g.Grow(0, next, m, "n")
	for j, id := range []string{"a", "b", "c"} {
		h := <-ends[id]
		if h.err != nil || len(h.segs) != 0 || h.next.GetRank() != int32(j) || h.membership != m {
			t.Errorf("%s's end of epoch 0: %+v; want its share (rank %d) of the bigger plan and the membership", id, h, j)
		}
	}
	waitGate(t, g, "epoch 0 to end", func() bool { return g.ended == 1 })
	for _, id := range []string{"a", "b", "c"} {
		ends[id] = askHeld(ctx, g, id, 1)
	}
	waitWaiting(t, g, 4)
	if g.open() != 1 {
		t.Fatal("epoch 1 ended without the newcomer's feed")
	}
	ends["n"] = askHeld(ctx, g, "n", 1)
	for id, ch := range ends {
		if h := <-ch; h.err != nil || h.next != nil || h.membership != nil {
			t.Errorf("%s's end of epoch 1: %+v; want a plain end", id, h)
		}
	}
}

// TestGateThawsWhenNoNewcomerJoins: a newcomer that will not join (Thaw)
// lets the epoch it waited at end as it would have, and none may join at
// the last epoch's end: it would have no epoch to be fed.
func TestGateThawsWhenNoNewcomerJoins(t *testing.T) {
	ctx := t.Context()
	g := newEpochGate(2, []string{"a", "b"}, make(chan struct{}))
	at := askBoundary(ctx, g)
	waitGate(t, g, "the newcomer to wait", func() bool { return g.growing })
	a0, b0 := askHeld(ctx, g, "a", 0), askHeld(ctx, g, "b", 0)
	if b := <-at; b.err != nil || b.epoch != 0 {
		t.Fatalf("Boundary = %d, %v; want epoch 0", b.epoch, b.err)
	}
	g.Thaw()
	for _, ch := range []<-chan held{a0, b0} {
		if h := <-ch; h.err != nil || h.next != nil || h.membership != nil {
			t.Errorf("end of epoch 0 after the thaw: %+v; want a plain end", h)
		}
	}
	if b := <-askBoundary(ctx, g); !errors.Is(b.err, errNoEpochToGrow) {
		t.Errorf("Boundary in the last epoch = %d, %v; want %v", b.epoch, b.err, errNoEpochToGrow)
	}
	a1, b1 := askHeld(ctx, g, "a", 1), askHeld(ctx, g, "b", 1)
	for _, ch := range []<-chan held{a1, b1} {
		if h := <-ch; h.err != nil || h.next != nil {
			t.Errorf("end of the last epoch: %+v; want a plain end", h)
		}
	}
}
