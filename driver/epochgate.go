package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
)

// errEpochsEnded refuses a deal that no running feed can serve: every
// epoch has ended, so the rows would be lost; the job restarts smaller at
// its checkpoint instead.
var errEpochsEnded = errors.New("driver: the survivors' feeds have ended every epoch")

// epochGate answers the survivors' held epoch ends while a job with input
// goes on in place (docs/reliability.md, "Going on in place"). An epoch
// ends when every live worker's feed has reached its end with no loss
// waiting for its deal and nothing dealt left to serve; a worker dealt
// rows of a lost rank gets them instead, and asks again after them. Rows
// dealt for an epoch that has already ended are served at the end of the
// worker's next epoch. Members are named by executor id: ranks change as
// the world shrinks.
type epochGate struct {
	epochs int
	stop   <-chan struct{} // closed when the driver shuts down

	mu      sync.Mutex
	live    map[string]bool
	held    map[string]int // the epoch whose end a member's feed waits at
	dealt   map[string][]continuation
	ended   int  // epochs before this one have ended
	pending bool // a member was lost and its rest is not dealt yet
	// growing keeps the open epoch from ending while a newcomer waits to
	// join at its end (Boundary).
	growing bool
	changed chan struct{}
}

// continuation is what a survivor is dealt when a rank is lost: rows of
// the lost rank's epoch (segments, padded to pad batches; none when the
// rest did not reach it), and its share of the smaller world's plan for
// the epochs after, if any.
type continuation struct {
	epoch int
	segs  []feed.Segment
	pad   int64
	next  *driverpb.FeedPlan
	// membership is the bigger world the member grows into before the
	// next epoch, when a newcomer joins at this epoch's end.
	membership *driverpb.Membership
}

// newEpochGate gates the epochs of a job of epochs epochs fed to members,
// until stop is closed.
func newEpochGate(epochs int, members []string, stop <-chan struct{}) *epochGate {
	g := &epochGate{epochs: epochs, stop: stop, live: map[string]bool{}, held: map[string]int{},
		dealt: map[string][]continuation{}, changed: make(chan struct{})}
	for _, id := range members {
		g.live[id] = true
	}
	return g
}

// Held is member id's feed at the end of epoch: it waits for what is
// dealt to it or for the epoch's end (nil), ctx, or the gate's stop
// (errStopped). A continuation without rows ends the member's epoch.
func (g *epochGate) Held(ctx context.Context, id string, epoch int) (*continuation, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.live[id] {
		return nil, fmt.Errorf("driver: executor %s is not a member of the running gang", id)
	}
	g.held[id] = epoch
	g.settleLocked()
	for {
		if q := g.dealt[id]; len(q) > 0 && q[0].epoch <= epoch {
			g.dealt[id] = q[1:]
			if len(q[0].segs) > 0 {
				delete(g.held, id) // it asks again after the rows
			}
			g.settleLocked()
			return &q[0], nil
		}
		if g.ended > epoch {
			return nil, nil
		}
		if err := g.waitLocked(ctx); err != nil {
			if g.held[id] == epoch {
				delete(g.held, id)
			}
			return nil, err
		}
	}
}

// waitLocked waits for the gate's next change, ctx, or its stop
// (errStopped); g.mu is held, and released while it waits.
func (g *epochGate) waitLocked(ctx context.Context) error {
	changed := g.changed
	g.mu.Unlock()
	defer g.mu.Lock()
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-g.stop:
		return errStopped
	}
}

// settleLocked ends the epochs that may end and wakes every waiter to
// look again; g.mu is held. Every change of the gate's state ends here,
// so that whether an epoch ended is decided when the change is made.
func (g *epochGate) settleLocked() {
	for g.ended < g.epochs && g.endsLocked(g.ended) {
		g.ended++
	}
	close(g.changed)
	g.changed = make(chan struct{})
}

// endsLocked says whether epoch may end: every live member waits at its
// end (or has gone past it), no loss waits for its deal, and nothing
// dealt for it is unserved.
func (g *epochGate) endsLocked(epoch int) bool {
	if g.pending || (g.growing && epoch+1 < g.epochs) {
		return false
	}
	for id := range g.live {
		if e, ok := g.held[id]; !ok || e < epoch {
			return false
		}
		if q := g.dealt[id]; len(q) > 0 && q[0].epoch <= epoch {
			return false
		}
	}
	return true
}

// open is the first epoch that has not ended.
func (g *epochGate) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ended
}

// Lost drops member id: no epoch ends until Deal is called. It returns
// the rows dealt to id that it had not served, for the caller to deal
// again with the rest of id's epoch.
func (g *epochGate) Lost(id string) []continuation {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.dealt[id]
	delete(g.live, id)
	delete(g.held, id)
	delete(g.dealt, id)
	g.pending = true
	g.settleLocked()
	return q
}

// Left drops member id, whose process ended without failing (it read
// what it wanted of the feed): the others' epochs no longer wait for it.
func (g *epochGate) Left(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, id)
	delete(g.held, id)
	delete(g.dealt, id)
	g.settleLocked()
}

// Deal gives members what they are dealt for epoch (parts, by executor
// id) and lets epochs end again. It fails, dealing nothing, when every
// epoch has ended.
func (g *epochGate) Deal(epoch int, parts map[string]continuation) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended >= g.epochs {
		return errEpochsEnded
	}
	for id, c := range parts {
		if g.live[id] && (len(c.segs) > 0 || c.next != nil) {
			c.epoch = epoch
			g.dealt[id] = append(g.dealt[id], c)
		}
	}
	g.pending = false
	g.settleLocked()
	return nil
}

// HoldEpoch answers a worker's feed that holds the end of an epoch: with
// the rows of a lost rank dealt to it, or, once the epoch ends for every
// live worker, with none. It waits for that, the caller's context, or the
// driver's stop.
func (s *controlServer) HoldEpoch(ctx context.Context, req *driverpb.HoldEpochRequest) (*driverpb.HoldEpochResponse, error) {
	if s.gate == nil {
		return nil, status.Error(codes.FailedPrecondition, "driver: this job's epochs end without the driver (it does not go on in place with input)")
	}
	c, err := s.gate.Held(ctx, req.GetExecutorId(), int(req.GetEpoch()))
	switch {
	case err == nil && c == nil:
		return &driverpb.HoldEpochResponse{}, nil
	case err == nil:
		return &driverpb.HoldEpochResponse{Rest: driverpb.SegmentsFromFeed(c.segs), RestBatches: c.pad, Next: c.next,
			Membership: c.membership}, nil
	case errors.Is(err, errStopped):
		return nil, status.Error(codes.Unavailable, "driver: shutting down")
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, status.Error(codes.FailedPrecondition, err.Error())
}
