package eventlog

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/observe/jobview"
)

// A running job's driver records each rank's progress every tick, so a
// log that kept every progress event grew with ranks times seconds: 11 KiB
// per rank-minute, most of a 1,000-rank job's 18 KiB (docs/scale.md). A
// history needs each rank's counters and a throughput chart, not every
// tick, so a segment keeps only each rank's latest progress: one event per
// rank per flush interval (spindle.eventLog.flushInterval), and one more
// with the rank's latest GPU sample when that is older.
//
// A large job's reported values are held the same way, per rank and set
// of names: the job page keeps jobview.SeriesPointsKept points of a chart
// however many ranks report, so a job of more than ThinValuesRanks ranks
// reporting every step would log hundreds of times what its history can
// show. A smaller job's values are all kept.

// ThinValuesRanks is the most ranks a job may have for its event log to
// keep every value its ranks report.
const ThinValuesRanks = 64

// heldProgress is a rank's latest progress (or values) event not yet
// written.
type heldProgress struct {
	at   time.Time
	line []byte
}

// holdLocked says whether ev, encoded as line, is held until the next
// flush in place of the one of its kind held before it: a progress event,
// or a large job's reported values. w.mu is held.
func (w *Writer) holdLocked(ev *jobview.Event, line []byte) bool {
	if ev.Kind == jobview.KindSubmitted && ev.Info != nil {
		w.worldSize = ev.Info.WorldSize
	}
	var key string
	switch {
	case ev.Kind == jobview.KindProgress && ev.Progress != nil && ev.Progress.GPUs > 0:
		// GPU use is sampled now and then: the latest sample is kept
		// beside the latest progress, which may have none.
		key = "g" + strconv.Itoa(ev.Rank)
	case ev.Kind == jobview.KindProgress:
		key = "p" + strconv.Itoa(ev.Rank)
	case ev.Kind == jobview.KindScalars && w.worldSize > ThinValuesRanks:
		key = "v" + strconv.Itoa(ev.Rank) + " " + strings.Join(slices.Sorted(maps.Keys(ev.Values)), " ")
	default:
		return false
	}
	if w.progress == nil {
		w.progress = map[string]heldProgress{}
	}
	w.progress[key] = heldProgress{at: ev.Time, line: line}
	return true
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
