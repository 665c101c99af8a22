package executor

import (
	"context"
	"os"
)

// rdmaHook discovers the RDMA devices the task may use, publishes the
// rank's RDMA line for the heartbeats and leaves the frameworks' hints
// for the environment.
type rdmaHook struct{ e *Executor }

// The parts of the life cycle rdmaHook takes part in.
var (
	_ taskHook = (*rdmaHook)(nil)
)

func (h *rdmaHook) Name() string { return "rdma" }

func (h *rdmaHook) Prepare(_ context.Context, r *taskRun) error {
	plan, err := discoverRDMA(r.t, os.Environ())
	h.e.rdmaReport.Store(rdmaReport(r.id, plan))
	if err != nil {
		return &setupError{err}
	}
	r.rdmaEnv = plan.Env
	return nil
}

func (h *rdmaHook) Close() error { return nil }
