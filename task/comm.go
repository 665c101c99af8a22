package task

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/envcontract"
	// The UCX data link: SPINDLE_COLLECTIVE_LINK=ucx (which the executor
	// sets from spindle.rdma.mode) selects it for the communicator Comm
	// joins. Without UCX on the host the link falls back to TCP.
	_ "github.com/spindle-ml/spindle/rdma/ucx"
)

// Comm joins the job's communicator for Spindle's Go collectives
// (collective.AllReduce, Broadcast, ...), as collective.FromEnv does, with
// every data link Spindle has: TCP, and UCX (InfiniBand, RoCE, shared
// memory) where SPINDLE_COLLECTIVE_LINK selects it and the host can use
// it. It blocks until the ring neighbours are connected; the caller
// closes the communicator.
//
// When a rank is lost and replaced alone while the ranks still join
// (spindle.failure.replaceWorkers), Comm joins again with the
// replacement, as the executor's membership says: a communicator whose
// ranks are not all in their first incarnation (Replaced) then starts
// with CatchUp on every rank.
func (e Env) Comm(ctx context.Context) (*collective.Comm, error) {
	if e.WorldSize < 1 {
		return nil, fmt.Errorf("%w: no world size to join a communicator with", ErrNotSpindle)
	}
	cfg, err := collective.ConfigFromEnv()
	if err != nil {
		return nil, fmt.Errorf("join the communicator of rank %d: %w", e.Rank, err)
	}
	cfg.OnSlowLink = reportSlowLink
	c, err := e.join(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("join the communicator of rank %d: %w", e.Rank, err)
	}
	return c, nil
}

// reportSlowLink sends a slow link's probe round trip to the job page (a
// reported value named for the peer; the reporting rank is this one).
func reportSlowLink(s collective.SlowLink) {
	name := envcontract.SlowLinkScalar + strconv.Itoa(s.Peer)
	_ = Report(0, map[string]float64{name: float64(s.RoundTrip) / float64(time.Millisecond)})
}

// Replaced says whether a communicator's ranks are not all in their first
// incarnation: some rank's process was replaced alone, so the ranks start
// with CatchUp (the replacement has no state).
func Replaced(c *collective.Comm) bool {
	for _, n := range c.Incarnations() {
		if n > 0 {
			return true
		}
	}
	return false
}
