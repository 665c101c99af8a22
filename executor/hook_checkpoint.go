package executor

import (
	"context"
	"log/slog"
)

// checkpointHook serves the training process's checkpoint saves and
// loads (spindle.checkpoint.dir) on a socket in the files directory.
type checkpointHook struct {
	logger *slog.Logger
	svc    *checkpointService
}

// The parts of the life cycle checkpointHook takes part in.
var (
	_ taskHook   = (*checkpointHook)(nil)
	_ hookRunner = (*checkpointHook)(nil)
)

func (h *checkpointHook) Name() string { return "checkpoint" }

func (h *checkpointHook) Prepare(_ context.Context, r *taskRun) error {
	// At the path trainingEnv gave the process.
	svc, err := newCheckpointService(checkpointSocket(r.sockDir), r.resolver, h.logger)
	if err != nil {
		return err
	}
	h.svc = svc
	return nil
}

func (h *checkpointHook) Run(ctx context.Context) error { return h.svc.Run(ctx) }

func (h *checkpointHook) Close() error { return h.svc.Close() }
