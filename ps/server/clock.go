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
	// hold, when ≥ 0, holds pulls at clocks ≥ hold: a checkpoint at that
	// clock is pending.
	hold    int64
	changed chan struct{} // closed and replaced at every change
	// heard marks the workers whose clock reached this server from the
	// worker itself, not from another server (a replacement learns the
	// clocks from the others first).
	heard []bool
}

func newClocks(workers int, s ps.Staleness) *clocks {
	return &clocks{staleness: s, clock: make([]int64, workers), left: make([]bool, workers), hold: -1,
		changed: make(chan struct{}), heard: make([]bool, workers)}
}

// merge takes the clocks another server heard (a snapshot: -1 for a
// worker that left): clocks only move forward, so the later of the two is
// right.
func (c *clocks) merge(snap []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	moved := false
	for w, cl := range snap {
		if w >= len(c.clock) {
			break
		}
		switch {
		case cl < 0 && !c.left[w]:
			c.left[w], moved = true, true
		case cl > c.clock[w]:
			c.clock[w], moved = cl, true
		}
	}
	if moved {
		c.bump()
	}
}

// allHeard says whether every worker still in the job has sent this
// server its clock itself.
func (c *clocks) allHeard() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w, h := range c.heard {
		if !h && !c.left[w] {
			return false
		}
	}
	return true
}

// advanceAndHold records that worker finished clock steps and, in the same
// step, holds the pulls of every worker at clock or beyond: under BSP no
// worker can have passed clock yet, so the checkpoint taken before the
// hold is released has every update of the steps up to clock and none
// after.
func (c *clocks) advanceAndHold(worker int, clock int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold < 0 || clock < c.hold {
		c.hold = clock
	}
	c.heard[worker] = true
	if clock > c.clock[worker] {
		c.clock[worker] = clock
	}
	c.bump()
}

// release ends the hold.
func (c *clocks) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = -1
	c.bump()
}

// reset sets every worker's clock to clock, none left, no hold: the job
// starts again from a checkpoint.
func (c *clocks) reset(clock int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.clock {
		c.clock[w], c.left[w] = clock, false
	}
	c.hold = -1
	c.bump()
}

// waitAll returns once every worker still in the job has finished clock
// steps, or fails as wait does.
func (c *clocks) waitAll(ctx context.Context, clock int64, timeout time.Duration) error {
	return c.waitFor(ctx, timeout, func() (string, bool) {
		var slow []string
		for w, cl := range c.clock {
			if !c.left[w] && cl < clock {
				slow = append(slow, fmt.Sprintf("worker %d at clock %d", w, cl))
			}
		}
		return strings.Join(slow, ", "), len(slow) == 0
	}, fmt.Sprintf("the checkpoint at clock %d", clock))
}

func (c *clocks) bump() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// advance records that worker finished clock steps.
func (c *clocks) advance(worker int, clock int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heard[worker] = true
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
	return c.waitFor(ctx, timeout, func() (string, bool) {
		if c.hold >= 0 && clock >= c.hold {
			return fmt.Sprintf("the checkpoint at clock %d", c.hold), false
		}
		if c.staleness < 0 {
			return "", true
		}
		slow := c.laggards(clock)
		parts := make([]string, len(slow))
		for i, w := range slow {
			parts[i] = fmt.Sprintf("worker %d at clock %d", w, c.clock[w])
		}
		return strings.Join(parts, ", "), len(slow) == 0
	}, fmt.Sprintf("worker %d at clock %d", worker, clock))
}

// waitFor waits until ready, checked with c.mu held, says so; it fails
// when ctx ends or when timeout passes with no change, with what ready
// said it waited for.
func (c *clocks) waitFor(ctx context.Context, timeout time.Duration, ready func() (string, bool), who string) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		why, ok := ready()
		changed := c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
			if !timer.Stop() {
				<-timer.C
			}
			timer.Reset(timeout)
		case <-ctx.Done():
			return fmt.Errorf("%s waited for %s (%s): %w", who, why, c.staleness, ctx.Err())
		case <-timer.C:
			return fmt.Errorf("%w: %s waited %s for %s under %s, and no clock moved (spindle.ps.waitTimeout)",
				errWaitTimeout, who, timeout, why, c.staleness)
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
