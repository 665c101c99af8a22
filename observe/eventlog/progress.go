package eventlog

import (
	"slices"
	"time"
)

// A running job's driver records each rank's progress every tick, so a
// log that kept every progress event grew with ranks times seconds: 11 KiB
// per rank-minute, most of a 1,000-rank job's 18 KiB (docs/scale.md). A
// history needs each rank's counters and a throughput chart, not every
// tick, so a segment keeps only each rank's latest progress: one event per
// rank per flush interval (spindle.eventLog.flushInterval).

// heldProgress is a rank's latest progress event not yet written.
type heldProgress struct {
	at   time.Time
	line []byte
}

// holdProgressLocked keeps line, a progress event of rank at at, in place
// of the one held before it. w.mu is held.
func (w *Writer) holdProgressLocked(rank int, at time.Time, line []byte) {
	if w.progress == nil {
		w.progress = map[int]heldProgress{}
	}
	w.progress[rank] = heldProgress{at: at, line: line}
}

// releaseProgressLocked appends the held progress events to the pending
// ones, oldest first, so the throughput chart replays in time order. w.mu
// is held.
func (w *Writer) releaseProgressLocked() {
	if len(w.progress) == 0 {
		return
	}
	held := make([]heldProgress, 0, len(w.progress))
	for _, h := range w.progress {
		held = append(held, h)
	}
	slices.SortFunc(held, func(a, b heldProgress) int { return a.at.Compare(b.at) })
	for _, h := range held {
		w.pending.Write(h.line)
		w.pending.WriteByte('\n')
	}
	clear(w.progress)
}
