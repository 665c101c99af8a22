package executor

import (
	"context"
	"log/slog"
	"time"
)

// gpuHook samples the GPUs the training process may use (those in its
// CUDA_VISIBLE_DEVICES) for the heartbeats. Without visible devices it
// does nothing.
type gpuHook struct {
	logger  *slog.Logger
	timeout time.Duration // of one sample (Config.GPUSampleTimeout)
	s       *gpuSampler
}

// The parts of the life cycle gpuHook takes part in.
var (
	_ taskHook   = (*gpuHook)(nil)
	_ hookRunner = (*gpuHook)(nil)
)

func (h *gpuHook) Name() string { return "gpu" }

func (h *gpuHook) Prepare(_ context.Context, r *taskRun) error {
	h.s = newGPUSampler(r.env, heartbeatInterval(r.t), h.timeout, h.logger)
	r.gpu = h.s
	return nil
}

func (h *gpuHook) Run(ctx context.Context) error {
	if h.s == nil {
		return nil
	}
	return h.s.Run(ctx)
}

func (h *gpuHook) Close() error { return nil }
