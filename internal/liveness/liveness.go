package liveness

import "time"

// HeldUp is how long a check that runs every period was held up, given
// that the loop was last free to run it at idle and runs it now: the gap
// beyond the period and one more (a ticker drops the ticks it could not
// deliver, so one late tick is not a stall). 0 for a check on time.
//
// Measure now with the clock when the check runs, not from the tick's own
// time: a tick sent before the process stopped waits in the channel and
// would hide the stall. And take idle after the loop's own work (a call
// that may take long), so that time spent waiting on others does not
// count as the loop's.
func HeldUp(idle, now time.Time, period time.Duration) time.Duration {
	return max(now.Sub(idle)-2*period, 0)
}

// Forgive returns seen, the time something was last heard from, moved d
// later, to now at most.
func Forgive(seen time.Time, d time.Duration, now time.Time) time.Time {
	if seen = seen.Add(d); seen.After(now) {
		return now
	}
	return seen
}
