package driver

import (
	"context"
	"errors"
	"fmt"
)

// ErrTimedOut is returned when the job ran longer than its timeout
// (spindle.job.timeout) and was stopped.
var ErrTimedOut = errors.New("driver: job timed out")

// Run runs the job to its end. It returns nil only when every training
// process exited 0; ErrTimedOut when the job outlived Config.Timeout and
// was stopped; ErrInterrupted when ctx ended first.
func (d *Driver) Run(ctx context.Context) (err error) {
	defer func() {
		if d.obs != nil {
			d.obs.end(err)
		}
	}()
	if d.cfg.Timeout <= 0 {
		return d.run(ctx)
	}
	jobCtx, cancel := context.WithTimeoutCause(ctx, d.cfg.Timeout, ErrTimedOut)
	defer cancel()
	err = d.run(jobCtx)
	// A job that ended as the timer fired keeps its own outcome; one cut
	// short by the timer, at any stage, timed out.
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(jobCtx), ErrTimedOut) {
		d.logger.Error("job timed out; executors stopped", "timeout", d.cfg.Timeout)
		return fmt.Errorf("%w after %s", ErrTimedOut, d.cfg.Timeout)
	}
	return err
}
