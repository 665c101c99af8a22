package driver

import (
	"fmt"
	"strings"
	"time"
)

// progress renders a job's progress: a live line redrawn in place on a
// terminal, or a plain line every interval elsewhere (log files, CI).
type progress struct {
	console  *Console
	interval time.Duration
	epochs   int

	start    time.Time
	last     time.Time // when a plain line was last written
	prev     map[int]rankProgress
	prevAt   time.Time
	rates    map[int]float64 // batches per second by rank
	rows     int64
	finished bool
}

func newProgress(console *Console, interval time.Duration, epochs int) *progress {
	now := time.Now()
	return &progress{console: console, interval: interval, epochs: epochs,
		start: now, last: now, prevAt: now, prev: map[int]rankProgress{}, rates: map[int]float64{}}
}

// update takes a new snapshot and redraws or logs when due.
func (p *progress) update(now time.Time, ranks []rankProgress) {
	if p.console == nil || p.finished {
		return
	}
	dt := now.Sub(p.prevAt).Seconds()
	var rows int64
	for _, r := range ranks {
		rows += r.rows
		if prev, ok := p.prev[r.rank]; ok && dt > 0 {
			p.rates[r.rank] = float64(r.batches-prev.batches) / dt
		}
		p.prev[r.rank] = r
	}
	p.rows = rows
	p.prevAt = now
	line := p.render(now, ranks)
	switch {
	case p.console.Terminal():
		p.console.Live(line)
	case now.Sub(p.last) >= p.interval:
		p.console.Eprintln(line)
		p.last = now
	}
}

func (p *progress) render(now time.Time, ranks []rankProgress) string {
	var b strings.Builder
	minEpoch := int32(-1)
	for _, r := range ranks {
		if !r.exited && (minEpoch < 0 || r.epoch < minEpoch) {
			minEpoch = r.epoch
		}
	}
	if minEpoch < 0 {
		minEpoch = int32(p.epochs - 1)
	}
	fmt.Fprintf(&b, "progress: epoch %d/%d, %s rows, %s", minEpoch+1, p.epochs, humanCount(p.rows),
		now.Sub(p.start).Round(time.Second))
	for _, r := range ranks {
		state := fmt.Sprintf("%.0f batches/s", p.rates[r.rank])
		if r.exited {
			state = "done"
		}
		fmt.Fprintf(&b, " | rank %d: %s", r.rank, state)
	}
	return b.String()
}

// finish ends a live line so later output starts on a fresh line.
func (p *progress) finish() {
	if p.console != nil && !p.finished {
		p.console.EndLive()
	}
	p.finished = true
}

func (p *progress) totalRows() int64 { return p.rows }

// humanCount renders n with a k/M/G suffix.
func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
