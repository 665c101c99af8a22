package executor

import (
	"context"
	"os"
)

// envHook builds the training process's environment from what the hooks
// before it provided: the feed's path, the RDMA hints, the shipped Python
// files. The hooks after it read the environment.
type envHook struct{ e *Executor }

// The parts of the life cycle envHook takes part in.
var (
	_ taskHook = (*envHook)(nil)
)

func (h *envHook) Name() string { return "environment" }

func (h *envHook) Prepare(_ context.Context, r *taskRun) error {
	env, err := trainingEnv(os.Environ(), r.t, r.id, h.e.cfg.Secret, r.feedPath, r.filesDir)
	if err != nil {
		return err
	}
	env = withRDMAHints(env, r.rdmaEnv)
	r.env = prependPythonPath(env, r.ship.pythonPath)
	return nil
}

func (h *envHook) Close() error { return nil }
