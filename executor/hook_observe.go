package executor

import (
	"context"
	"log/slog"
)

// observationHook takes the training process's reports and spans on its
// report socket, and its usage, for the heartbeats and the exit report.
type observationHook struct {
	logger *slog.Logger
	obs    *observations
	gpu    *gpuSampler
}

// The parts of the life cycle observationHook takes part in.
var (
	_ taskHook       = (*observationHook)(nil)
	_ hookRunner     = (*observationHook)(nil)
	_ processWatcher = (*observationHook)(nil)
)

func (h *observationHook) Name() string { return "observations" }

func (h *observationHook) Prepare(_ context.Context, r *taskRun) error {
	obs, err := newObservations(reportSocket(r.sockDir), h.logger)
	if err != nil {
		return err
	}
	h.obs, h.gpu = obs, r.gpu
	r.obs = obs
	return nil
}

func (h *observationHook) Run(ctx context.Context) error { return h.obs.Run(ctx) }

// Started has the process's usage (and its GPUs') sampled.
func (h *observationHook) Started(pid int) { h.obs.setProcess(pid, h.gpu) }

func (h *observationHook) Close() error {
	h.obs.Close()
	return nil
}
