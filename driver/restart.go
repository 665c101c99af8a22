package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/internal/jobview"
)

// Failure policies (spindle.failure.policy).
const (
	// PolicyFail ends the job at its first failure.
	PolicyFail = "fail"
	// PolicyRestart stops every rank, starts a new gang (a new
	// generation) and lets each process resume from its latest
	// checkpoint, up to MaxRestarts times.
	PolicyRestart = "restart"
)

// generations runs the job's gang, and under PolicyRestart new gangs after
// failures, until one succeeds, a failure is not one a restart can help,
// or the restarts are used up.
func (d *Driver) generations(ctx context.Context, plan *feed.JobPlan, slots []slot, tasks taskBuilder,
	served map[string]string, start time.Time) error {
	c := d.cfg
	for gen := 0; ; gen++ {
		launched, err := d.generation(ctx, gen, plan, slots, tasks, served, start)
		switch {
		case err == nil:
			return nil
		case c.FailurePolicy != PolicyRestart || !launched || !restartable(err) || ctx.Err() != nil:
			if gen > 0 {
				return fmt.Errorf("%w (generation %d, after %d restart%s)", err, gen, gen, plural(gen))
			}
			return err
		case gen >= c.MaxRestarts:
			return fmt.Errorf("%w (the job was restarted %d time%s, spindle.failure.maxRestarts)", err, gen, plural(gen))
		}
		reason, _, _ := strings.Cut(err.Error(), "\n")
		d.logger.Warn("job failed; restarting it", "generation", gen+1, "of", c.MaxRestarts, "reason", reason)
		if c.Console != nil {
			c.Console.Eprintln(fmt.Sprintf("job %s failed: %s; restarting every rank (restart %d of %d), each from its latest checkpoint",
				c.JobID, reason, gen+1, c.MaxRestarts))
		}
		if d.obs != nil {
			d.obs.record(jobview.Event{Kind: jobview.KindRestart, Generation: gen + 1, Reason: reason})
		}
	}
}

// restartable says whether a restart could help: not for bad input or
// settings, an interrupted or timed-out job.
func restartable(err error) bool {
	for _, e := range []error{ErrInterrupted, ErrTimedOut, ErrConfig, feed.ErrInput, wire.ErrNotNumeric} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

// generationSlots gives a generation's executors ids of their own, so a
// cluster manager never mistakes them for the ones that came before.
func generationSlots(slots []slot, gen int) []slot {
	if gen == 0 {
		return slots
	}
	out := make([]slot, len(slots))
	for i, s := range slots {
		s.id = fmt.Sprintf("%s-g%d", s.id, gen)
		out[i] = s
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
