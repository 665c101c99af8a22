package testutil

import (
	"fmt"
	"sync"
	"time"
)

// A Budget is a test's timeout that keeps up with the machine's load for
// as long as the wait lasts. Scale reads the load once, when a wait
// begins; a wait that began on a quiet machine (the first minute of
// make test) and lasts minutes (a Hadoop mini cluster starting) is cut
// short when a second make test beside it takes the load to five times
// as much. A Budget instead charges the wall time between two checks
// divided by LoadStretch at the later one: a minute at twice the quiet
// load spends 30 s of it. At a steady load it lasts as long as Scale's
// duration; it never lasts more than the timeout times the timescale and
// MaxLoadStretch. A Budget is for one goroutine.
type Budget struct {
	total, left time.Duration
	start, last time.Time
}

// NewBudget starts a budget of timeout stretched by SPINDLE_TEST_TIMESCALE
// (the load is charged as it comes). An invalid timescale panics, as in
// Scale.
func NewBudget(timeout time.Duration) *Budget {
	f, err := Timescale()
	if err != nil {
		panic(err)
	}
	total := time.Duration(float64(timeout) * f)
	now := time.Now()
	return &Budget{total: total, left: total, start: now, last: now}
}

// Spent charges the time since the last check and reports whether the
// budget is gone.
func (b *Budget) Spent() bool {
	now := time.Now()
	b.charge(now.Sub(b.last), LoadStretch())
	b.last = now
	return b.left <= 0
}

// charge takes wall time spent at a load stretch off the budget.
func (b *Budget) charge(wall time.Duration, stretch float64) {
	b.left -= time.Duration(float64(wall) / max(stretch, 1))
}

// String says how long the budget is and, once the load has made it
// last a quarter longer, how long it has lasted on the wall clock.
func (b *Budget) String() string {
	wall := b.last.Sub(b.start)
	if charged := b.total - b.left; wall-charged > b.total/4 {
		return fmt.Sprintf("%v (%v on the wall clock: the machine was busy)", b.total, wall.Round(time.Millisecond))
	}
	return b.total.String()
}

// A Timer is a Budget for a select: C is closed once the budget is spent.
// Stop releases the goroutine that checks it; call it (deferred) wherever
// the select may end another way.
type Timer struct {
	C <-chan struct{}

	budget *Budget
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// NewTimer starts a Timer on a budget of timeout.
func NewTimer(timeout time.Duration) *Timer {
	c := make(chan struct{})
	t := &Timer{C: c, budget: NewBudget(timeout), stop: make(chan struct{}), done: make(chan struct{})}
	// Checks are cheap (a read of /proc/loadavg): fifty over the budget,
	// no further apart than a second.
	every := min(max(t.budget.total/50, time.Millisecond), time.Second)
	go func() {
		defer close(t.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tick.C:
				if t.budget.Spent() {
					close(c)
					return
				}
			}
		}
	}()
	return t
}

// Stop stops the timer and waits for its goroutine. It may be called
// more than once, and after C is closed.
func (t *Timer) Stop() {
	t.once.Do(func() { close(t.stop) })
	<-t.done
}

// String describes the budget as Budget.String does; read it after C is
// closed or Stop has returned.
func (t *Timer) String() string { return t.budget.String() }
