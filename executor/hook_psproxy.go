package executor

import (
	"context"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/ps/proxy"
)

// psProxyHook runs the proxy through which the training process reaches
// the parameter servers, and leaves them for a process that ended well
// without leaving.
type psProxyHook struct {
	e *Executor
	p *proxy.Proxy
}

// The parts of the life cycle psProxyHook takes part in.
var (
	_ taskHook    = (*psProxyHook)(nil)
	_ hookRunner  = (*psProxyHook)(nil)
	_ exitWatcher = (*psProxyHook)(nil)
)

func (h *psProxyHook) Name() string { return "ps-proxy" }

func (h *psProxyHook) Prepare(_ context.Context, r *taskRun) error {
	// At the path trainingEnv gave the process.
	link := envValue(r.env, envcontract.CollectiveLink)
	p, err := newPSProxy(r.sockDir, r.id, h.e.cfg.Secret, link, h.e.logger)
	if err != nil {
		return err
	}
	h.p = p
	return nil
}

func (h *psProxyHook) Run(ctx context.Context) error { return h.p.Run(ctx) }

// Exited leaves the parameter servers for a process that ended well
// without leaving them (spindle.ps's close): it must not hold the other
// workers back.
func (h *psProxyHook) Exited(ctx context.Context, exit exitStatus) {
	if !exit.ok() {
		return
	}
	leaveCtx, cancel := context.WithTimeout(ctx, h.e.cfg.PSLeaveTimeout)
	defer cancel()
	if err := h.p.Leave(leaveCtx); err != nil {
		h.e.logger.Warn("could not leave the parameter servers for the finished process", "err", err)
	}
}

func (h *psProxyHook) Close() error { return h.p.Close() }
