package driver

import (
	"context"
	"errors"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// errNoEpochToGrow refuses a newcomer that could join only after the last
// epoch: no epoch is left for it to be fed.
var errNoEpochToGrow = errors.New("driver: no epoch is left for a newcomer to join at")

// Boundary waits for the next epoch end a newcomer may join at: every
// live member holds the end of the open epoch, no loss waits for its
// deal and nothing dealt is unserved. From the call on, the open epoch
// does not end (unless it is the last) until Grow or Thaw, so that the
// end is not missed. It returns that epoch; errNoEpochToGrow when the
// last epoch is reached first.
func (g *epochGate) Boundary(ctx context.Context) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.growing = true
	for {
		if g.ended+1 >= g.epochs {
			g.growing = false
			g.settleLocked()
			return 0, errNoEpochToGrow
		}
		if g.atBoundaryLocked() {
			return g.ended, nil
		}
		if err := g.waitLocked(ctx); err != nil {
			g.growing = false
			g.settleLocked()
			return 0, err
		}
	}
}

// atBoundaryLocked says whether the open epoch would end now but for
// the growth waiting at it; g.mu is held.
func (g *epochGate) atBoundaryLocked() bool {
	g.growing = false
	at := g.endsLocked(g.ended)
	g.growing = true
	return at
}

// Grow ends epoch (the one Boundary returned) with the bigger world:
// each running member is answered with its share of that world's plan
// for the later epochs (next, by executor id) and the membership its
// process grows into, and newcomer becomes a member whose feed starts at
// the next epoch.
func (g *epochGate) Grow(epoch int, next map[string]*driverpb.FeedPlan, m *driverpb.Membership, newcomer string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id := range g.live {
		g.dealt[id] = append(g.dealt[id], continuation{epoch: epoch, next: next[id], membership: m})
	}
	g.live[newcomer], g.held[newcomer] = true, epoch
	g.growing = false
	g.settleLocked()
}

// Thaw lets the open epoch end again when a newcomer waiting at it will
// not join.
func (g *epochGate) Thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.growing = false
	g.settleLocked()
}
