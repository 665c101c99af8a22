package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/ps"
)

// clocks are the workers' clocks as this server has heard them: how many
// steps each has finished. A pull waits while its worker is more than the
// staleness bound ahead of the slowest worker still in the job.
type clocks struct {
	staleness ps.Staleness
	mu        sync.Mutex
	clock     []int64
	left      []bool
	changed   chan struct{} // closed and replaced at every change
}

func newClocks(workers int, s ps.Staleness) *clocks {
	return &clocks{staleness: s, clock: make([]int64, workers), left: make([]bool, workers), changed: make(chan struct{})}
}

func (c *clocks) bump() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// advance records that worker finished clock steps.
func (c *clocks) advance(worker int, clock int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if clock > c.clock[worker] {
		c.clock[worker] = clock
		c.bump()
	}
}

// leave records that worker is done: no one waits for it any more.
func (c *clocks) leave(worker int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.left[worker] {
		c.left[worker] = true
		c.bump()
	}
}

// laggards returns the workers that keep a worker at clock from going on,
// and the changed channel to wait on. c.mu is held.
func (c *clocks) laggards(clock int64) []int {
	var out []int
	for w, cl := range c.clock {
		if !c.left[w] && clock-cl > int64(c.staleness) {
			out = append(out, w)
		}
	}
	return out
}

// wait returns once worker, at clock, is within the staleness bound of
// every worker still in the job. It fails when ctx ends or when timeout
// passes with no clock moving, naming the workers it waited for.
func (c *clocks) wait(ctx context.Context, worker int, clock int64, timeout time.Duration) error {
	if c.staleness < 0 {
		return nil
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		slow := c.laggards(clock)
		changed := c.changed
		var why string
		if len(slow) > 0 {
			parts := make([]string, len(slow))
			for i, w := range slow {
				parts[i] = fmt.Sprintf("worker %d at clock %d", w, c.clock[w])
			}
			why = strings.Join(parts, ", ")
		}
		c.mu.Unlock()
		if len(slow) == 0 {
			return nil
		}
		select {
		case <-changed:
			if !timer.Stop() {
				<-timer.C
			}
			timer.Reset(timeout)
		case <-ctx.Done():
			return fmt.Errorf("worker %d at clock %d waited for %s (%s): %w", worker, clock, why, c.staleness, ctx.Err())
		case <-timer.C:
			return fmt.Errorf("%w: worker %d at clock %d waited %s for %s under %s, and no clock moved (spindle.ps.waitTimeout)",
				errWaitTimeout, worker, clock, timeout, why, c.staleness)
		}
	}
}

// snapshot returns the clocks, -1 for workers that left.
func (c *clocks) snapshot() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int64, len(c.clock))
	for w, cl := range c.clock {
		out[w] = cl
		if c.left[w] {
			out[w] = -1
		}
	}
	return out
}
