package executor

import (
	"context"

	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
)

// taskHook is one per-task service of the executor: the feed, the
// checkpoint service, the parameter-server proxy, the observations, the
// GPU sampler and the steps that build the training process's
// environment. runTask prepares the services in order before the training
// process starts, runs those that have a loop while it runs, and closes
// them in reverse order once it is gone. A new service is a new file and
// an entry in (*Executor).services, not another branch in runTask.
type taskHook interface {
	// Name names the service in logs.
	Name() string
	// Prepare sets the service up. It may read what the services before
	// it put in r and add what it offers (a socket path, the
	// environment). An error ends the task before the process starts.
	Prepare(ctx context.Context, r *taskRun) error
	// Close releases what Prepare took, after the process and the
	// service's Run have ended. It is called only after Prepare succeeded.
	Close() error
}

// hookRunner is a service with a loop that runs while the training
// process does. Run returns when ctx ends; an error ends the task's run.
type hookRunner interface {
	Run(ctx context.Context) error
}

// processWatcher is a service told the training process's id once it
// started.
type processWatcher interface {
	Started(pid int)
}

// exitWatcher is a service told how the training process ended, before
// the services are closed.
type exitWatcher interface {
	Exited(ctx context.Context, exit exitStatus)
}

// taskRun is what runTask's steps and services share about one task.
type taskRun struct {
	t  *Task
	id identity
	// workDir holds the spill and, in filesDir, the localized files;
	// sockDir the Unix sockets of the feed and the executor's services
	// (the same directory unless workDir's paths are too long for them).
	workDir, sockDir, filesDir string
	resolver                   *fsys.Resolver
	ship                       shipped

	// Filled by the services, in the order they are prepared.
	feedPath string       // SPINDLE_FEED; empty when the rank is not fed
	feed     *wire.Server // the pushed feed's server; nil when none
	rdmaEnv  map[string]string
	env      []string // the training process's environment
	gpu      *gpuSampler
	obs      *observations
	// membership hands the process the gang's membership; nil in tests
	// that run no hooks.
	membership *membershipHook
}

// services lists the services task t of rank id needs, in the order they
// are prepared: each may use what those before it provide.
func (e *Executor) services(t *Task, id identity) []taskHook {
	var s []taskHook
	// Only workers are fed: the task of another role names no feed mode.
	if t.Feed.Mode != "" && id.feeds() {
		s = append(s, &feedHook{e: e})
	}
	s = append(s, &rdmaHook{e: e})
	if t.ReplacesWorkers {
		s = append(s, &membershipHook{logger: e.logger})
	}
	s = append(s, &envHook{e: e})
	if t.CheckpointDir != "" {
		s = append(s, &checkpointHook{logger: e.logger})
	}
	if psProxied(t, id) {
		s = append(s, &psProxyHook{e: e})
	}
	return append(s, &gpuHook{logger: e.logger, timeout: e.cfg.GPUSampleTimeout}, &observationHook{logger: e.logger})
}

// prepareHooks prepares svcs in order. It returns those prepared, to be
// closed, even when one failed.
func prepareHooks(ctx context.Context, svcs []taskHook, r *taskRun) ([]taskHook, error) {
	for i, s := range svcs {
		if err := s.Prepare(ctx, r); err != nil {
			return svcs[:i], err
		}
	}
	return svcs, nil
}

// closeHooks closes svcs in reverse order.
func (e *Executor) closeHooks(svcs []taskHook) {
	for i := len(svcs) - 1; i >= 0; i-- {
		if err := svcs[i].Close(); err != nil {
			e.logger.Debug("close a task service", "service", svcs[i].Name(), "err", err)
		}
	}
}
