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
	last     time.Time        // when a plain line was last written
	samples  map[int][]sample // recent batch counts by rank, oldest first
	rates    map[int]float64  // batches per second by rank
	rows     int64
	finished bool
}

func newProgress(console *Console, interval time.Duration, epochs int) *progress {
	now := time.Now()
	return &progress{console: console, interval: interval, epochs: epochs,
		start: now, last: now, samples: map[int][]sample{}, rates: map[int]float64{}}
}

// sample is a rank's batch count at a point in time.
type sample struct {
	at      time.Time
	batches int64
}

// rateWindow is how far back batches/s looks: longer than a heartbeat
// interval, so the rate does not flicker between heartbeats.
const rateWindow = 3 * time.Second

// update takes a new snapshot and redraws or logs when due.
func (p *progress) update(now time.Time, ranks []rankProgress) {
	if p.console == nil || p.finished {
		return
	}
	var rows int64
	for _, r := range ranks {
		rows += r.rows
		ss := append(p.samples[r.rank], sample{now, r.batches})
		for len(ss) > 2 && now.Sub(ss[1].at) >= rateWindow {
			ss = ss[1:]
		}
		p.samples[r.rank] = ss
		if dt := now.Sub(ss[0].at).Seconds(); dt > 0 {
			p.rates[r.rank] = float64(r.batches-ss[0].batches) / dt
		}
	}
	p.rows = rows
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
		if r.role.Feeds() && !r.exited && (minEpoch < 0 || r.epoch < minEpoch) {
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
		switch {
		case r.exited:
			state = "done"
		case !r.role.Feeds():
			state = "running"
		}
		name := fmt.Sprintf("rank %d", r.rank)
		if r.name != "" {
			name = r.name
		}
		fmt.Fprintf(&b, " | %s: %s", name, state)
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
