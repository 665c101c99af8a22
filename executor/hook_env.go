package executor

import (
	"context"
	"os"
	"strings"

	"github.com/spindle-ml/spindle/internal/envcontract"
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
	env, err := trainingEnv(os.Environ(), r.t, r.id, h.e.cfg.Secret, r.feedPath, r.filesDir, r.sockDir)
	if err != nil {
		return err
	}
	if r.id.worldSize > 1 && !hasVar(env, envcontract.TFConfig) {
		h.e.logger.Warn("TF_CONFIG left out: the cluster of every rank is over Linux's limit for one environment variable",
			"world_size", r.id.worldSize, "limit_bytes", envcontract.MaxVarBytes)
	}
	env = withRDMAHints(env, r.rdmaEnv)
	r.env = prependPythonPath(env, r.ship.pythonPath)
	return nil
}

func (h *envHook) Close() error { return nil }

// hasVar reports whether env, as KEY=value strings, sets name.
func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}
