package task

import (
	"context"
	"fmt"

	"github.com/spindle-ml/spindle/collective"
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
func (e Env) Comm(ctx context.Context) (*collective.Comm, error) {
	if e.WorldSize < 1 {
		return nil, fmt.Errorf("%w: no world size to join a communicator with", ErrNotSpindle)
	}
	c, err := collective.FromEnv(ctx)
	if err != nil {
		return nil, fmt.Errorf("join the communicator of rank %d: %w", e.Rank, err)
	}
	return c, nil
}
