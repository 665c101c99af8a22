package driver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// held is one answer of the gate to a member's held epoch end.
type held struct {
	segs       []feed.Segment
	next       *driverpb.FeedPlan
	membership *driverpb.Membership
	err        error
}

// askHeld asks the gate, in the background, about id's end of epoch.
func askHeld(ctx context.Context, g *epochGate, id string, epoch int) <-chan held {
	ch := make(chan held, 1)
	go func() {
		c, err := g.Held(ctx, id, epoch)
		h := held{err: err}
		if c != nil {
			h.segs, h.next, h.membership = c.segs, c.next, c.membership
		}
		ch <- h
	}()
	return ch
}

// rowsDealt deals each member its segments, padded to pad batches.
func rowsDealt(parts map[string][]feed.Segment, pad int64) map[string]continuation {
	out := map[string]continuation{}
	for id, segs := range parts {
		out[id] = continuation{segs: segs, pad: pad}
	}
	return out
}

// waitGate waits until cond holds of the gate's state (g.mu held), what
// saying what is waited for.
func waitGate(t *testing.T, g *epochGate, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, testutil.Holds(what, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return cond()
	}))
}

// waitWaiting waits until n members' feeds wait at an epoch's end.
func waitWaiting(t *testing.T, g *epochGate, n int) {
	t.Helper()
	waitGate(t, g, fmt.Sprintf("%d feeds at an epoch's end", n), func() bool { return len(g.held) == n })
}

// waitHeldAt waits until member id's feed waits at the end of epoch.
func waitHeldAt(t *testing.T, g *epochGate, id string, epoch int) {
	t.Helper()
	waitGate(t, g, fmt.Sprintf("%s's feed at the end of epoch %d", id, epoch), func() bool {
		e, ok := g.held[id]
		return ok && e == epoch
	})
}

// endedEpochs is how many epochs the gate has ended.
func endedEpochs(g *epochGate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ended
}

// answer waits for an answer of the gate.
func answer(t *testing.T, ch <-chan held) held {
	t.Helper()
	return within(t, ch, "the gate did not answer")
}

// within waits for a value on ch, failing with msg when none comes.
func within[T any](t *testing.T, ch <-chan T, msg string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testutil.Scale(30 * time.Second)):
		t.Fatal(msg)
		var zero T
		return zero
	}
}

// notYet checks that none of chs has an answer.
func notYet(t *testing.T, what string, chs ...<-chan held) {
	t.Helper()
	for i, ch := range chs {
		select {
		case h := <-ch:
			t.Fatalf("%s: waiter %d answered %+v", what, i, h)
		default:
		}
	}
}

// TestEpochGateEndsWhenEveryMemberWaits: an epoch ends for no member until
// every live member's feed waits at its end.
func TestEpochGateEndsWhenEveryMemberWaits(t *testing.T) {
	ctx := context.Background()
	g := newEpochGate(2, []string{"a", "b", "c"}, nil)
	a, b := askHeld(ctx, g, "a", 0), askHeld(ctx, g, "b", 0)
	waitWaiting(t, g, 2)
	if e := endedEpochs(g); e != 0 {
		t.Fatalf("with two of three at the end, %d epochs ended", e)
	}
	notYet(t, "two of three at the end", a, b)
	c := askHeld(ctx, g, "c", 0)
	for _, ch := range []<-chan held{a, b, c} {
		if h := answer(t, ch); h.err != nil || h.segs != nil {
			t.Fatalf("epoch 0 answered %+v, want its end", h)
		}
	}
	// A member whose process ended leaves: the others' epoch ends
	// without it.
	a, b = askHeld(ctx, g, "a", 1), askHeld(ctx, g, "b", 1)
	waitHeldAt(t, g, "a", 1)
	waitHeldAt(t, g, "b", 1)
	if e := endedEpochs(g); e != 1 {
		t.Fatalf("with c not at the end of epoch 1, %d epochs ended", e)
	}
	g.Left("c")
	for _, ch := range []<-chan held{a, b} {
		if h := answer(t, ch); h.err != nil || h.segs != nil {
			t.Fatalf("epoch 1 answered %+v after c left, want its end", h)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	a = askHeld(cctx, g, "a", 2)
	waitHeldAt(t, g, "a", 2)
	cancel()
	if h := answer(t, a); !errors.Is(h.err, context.Canceled) {
		t.Fatalf("a cancelled wait answered %+v", h)
	}
}

// TestEpochGateDealsALostRanksRest: with the survivors at the end of
// epoch 0 and a member lost, the epoch waits for the deal; each survivor
// then gets its part, and the epoch ends once they ask again.
func TestEpochGateDealsALostRanksRest(t *testing.T) {
	ctx := context.Background()
	g := newEpochGate(2, []string{"a", "b", "c"}, nil)
	a, b := askHeld(ctx, g, "a", 0), askHeld(ctx, g, "b", 0)
	waitWaiting(t, g, 2)
	if q := g.Lost("c"); q != nil {
		t.Fatalf("a member dealt nothing left %v unserved", q)
	}
	if e := endedEpochs(g); e != 0 {
		t.Fatalf("a loss not dealt yet ended %d epochs", e)
	}
	notYet(t, "a loss not dealt yet", a, b)
	parts := map[string][]feed.Segment{"a": {{Rank: 2, RowStart: 40, RowEnd: 60}}, "b": {{Rank: 2, RowStart: 60, RowEnd: 70}}}
	if err := g.Deal(0, rowsDealt(parts, 0)); err != nil {
		t.Fatal(err)
	}
	for id, ch := range map[string]<-chan held{"a": a, "b": b} {
		if h := answer(t, ch); h.err != nil || fmt.Sprint(h.segs) != fmt.Sprint(parts[id]) {
			t.Fatalf("%s was dealt %+v, want %v", id, h, parts[id])
		}
	}
	a = askHeld(ctx, g, "a", 0)
	waitWaiting(t, g, 1)
	if e := endedEpochs(g); e != 0 {
		t.Fatalf("with b still serving its part, %d epochs ended", e)
	}
	notYet(t, "b still serving its part", a)
	b = askHeld(ctx, g, "b", 0)
	for _, ch := range []<-chan held{a, b} {
		if h := answer(t, ch); h.err != nil || h.segs != nil {
			t.Fatalf("after the rest epoch 0 answered %+v, want its end", h)
		}
	}
}

// TestEpochGateCarriesALateDeal: a member lost after its epoch ended for
// everyone has its rest served at the end of the survivors' next epoch;
// after the last epoch a deal is refused, as no feed could serve it.
func TestEpochGateCarriesALateDeal(t *testing.T) {
	ctx := context.Background()
	g := newEpochGate(2, []string{"a", "b"}, nil)
	a, b := askHeld(ctx, g, "a", 0), askHeld(ctx, g, "b", 0)
	answer(t, a)
	answer(t, b)
	g.Lost("b")
	rest := []feed.Segment{{Rank: 1, RowStart: 90, RowEnd: 100}}
	if err := g.Deal(0, rowsDealt(map[string][]feed.Segment{"a": rest}, 0)); err != nil {
		t.Fatal(err)
	}
	if h := answer(t, askHeld(ctx, g, "a", 1)); fmt.Sprint(h.segs) != fmt.Sprint(rest) {
		t.Fatalf("the end of epoch 1 answered %+v, want epoch 0's late rest", h)
	}
	if h := answer(t, askHeld(ctx, g, "a", 1)); h.err != nil || h.segs != nil {
		t.Fatalf("epoch 1 answered %+v, want its end", h)
	}
	g.Lost("a")
	if err := g.Deal(1, nil); !errors.Is(err, errEpochsEnded) {
		t.Fatalf("a deal after the last epoch: %v, want errEpochsEnded", err)
	}
}

// TestHoldEpochOverTheControlPlane: the driver refuses a held epoch end
// when it gates no epochs or the asker is not a member, hands a survivor
// its part of a lost rank's rest, ends the epoch, and lets go of waiters
// when it stops.
func TestHoldEpochOverTheControlPlane(t *testing.T) {
	ctx := context.Background()
	stop := make(chan struct{})
	s := &controlServer{stop: stop}
	if _, err := s.HoldEpoch(ctx, &driverpb.HoldEpochRequest{ExecutorId: "exec-1"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a job without a gate: %v, want refused", err)
	}
	s.gate = newEpochGate(2, []string{"exec-1", "exec-2", "exec-3"}, stop)
	if _, err := s.HoldEpoch(ctx, &driverpb.HoldEpochRequest{ExecutorId: "exec-9"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("an executor of no gang: %v, want refused", err)
	}
	type reply struct {
		resp *driverpb.HoldEpochResponse
		err  error
	}
	ask := func(id string, epoch int32) <-chan reply {
		ch := make(chan reply, 1)
		go func() {
			resp, err := s.HoldEpoch(ctx, &driverpb.HoldEpochRequest{ExecutorId: id, Epoch: epoch})
			ch <- reply{resp, err}
		}()
		return ch
	}
	recv := func(ch <-chan reply) reply {
		t.Helper()
		return within(t, ch, "the driver did not answer a held epoch end")
	}
	first, third := ask("exec-1", 0), ask("exec-3", 0)
	waitWaiting(t, s.gate, 2)
	s.gate.Lost("exec-2")
	// exec-1 is dealt rows; the rest does not reach exec-3, which is sent
	// only its share of the smaller world's plan, and its epoch ends.
	rest := []feed.Segment{{Rank: 1, RowStart: 32, RowEnd: 50}}
	plan1, plan3 := &driverpb.FeedPlan{Rank: 0, TargetBatches: 7}, &driverpb.FeedPlan{Rank: 1, TargetBatches: 7}
	if err := s.gate.Deal(0, map[string]continuation{"exec-1": {segs: rest, pad: 2, next: plan1}, "exec-3": {next: plan3}}); err != nil {
		t.Fatal(err)
	}
	r := recv(first)
	if r.err != nil || fmt.Sprint(driverpb.FeedSegments(r.resp.GetRest())) != fmt.Sprint(rest) || r.resp.GetRestBatches() != 2 ||
		r.resp.GetNext().GetRank() != 0 {
		t.Fatalf("the survivor was answered %v, %v; want its part %v padded to 2 and the plan of rank 0", r.resp, r.err, rest)
	}
	if r := recv(third); r.err != nil || len(r.resp.GetRest()) != 0 || r.resp.GetNext().GetRank() != 1 {
		t.Fatalf("the survivor dealt no rows was answered %v, %v; want the plan of rank 1 alone", r.resp, r.err)
	}
	if r := recv(ask("exec-1", 0)); r.err != nil || len(r.resp.GetRest()) != 0 || r.resp.GetNext() != nil {
		t.Fatalf("after the survivor's part the epoch answered %v, %v; want its end", r.resp, r.err)
	}
	waiting := ask("exec-1", 1) // exec-3 is not at the end of epoch 1
	waitWaiting(t, s.gate, 2)
	close(stop)
	if r := recv(waiting); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("a waiter when the driver stops: %v, want unavailable", r.err)
	}
}
