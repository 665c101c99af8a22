package driver

import (
	"fmt"
	"strings"
	"time"
)

// progress renders a job's progress: a live line redrawn in place on a
// terminal, or a plain line every interval elsewhere (log files, CI).
//
// It counts what training processes took off their feed sockets, not what
// executors wrote into them: the socket buffers hold megabytes of
// read-ahead, which a process that is slow or stuck has not seen.
type progress struct {
	console  *Console
	interval time.Duration
	epochs   int
	expect   int64 // rows the job feeds over every epoch and rank; 0 when unknown

	start    time.Time
	last     time.Time        // when a plain line was last written
	samples  map[int][]sample // recent taken rows by rank, oldest first
	total    []sample         // recent taken rows of the whole job
	rates    map[int]float64  // rows per second by rank
	rate     float64          // rows per second of the whole job
	rows     int64            // rows taken by training processes
	sent     int64            // rows written to feed sockets
	finished bool
}

// newProgress returns a progress line for a job of epochs epochs that
// feeds expect rows in all (0 when unknown: no ETA).
func newProgress(console *Console, interval time.Duration, epochs int, expect int64) *progress {
	now := time.Now()
	return &progress{console: console, interval: interval, epochs: epochs, expect: expect,
		start: now, last: now, samples: map[int][]sample{}, rates: map[int]float64{}}
}

// sample is a count of rows at a point in time.
type sample struct {
	at   time.Time
	rows int64
}

// rateWindow is how far back rows/s looks: longer than a heartbeat
// interval, so the rate does not flicker between heartbeats.
const rateWindow = 3 * time.Second

// addSample appends s to ss, drops samples older than the window (keeping
// two), and returns ss with the rate over it.
func addSample(ss []sample, s sample) ([]sample, float64, bool) {
	ss = append(ss, s)
	for len(ss) > 2 && s.at.Sub(ss[1].at) >= rateWindow {
		ss = ss[1:]
	}
	if dt := s.at.Sub(ss[0].at).Seconds(); dt > 0 {
		return ss, float64(s.rows-ss[0].rows) / dt, true
	}
	return ss, 0, false
}

// update takes a new snapshot and redraws or logs when due.
func (p *progress) update(now time.Time, ranks []rankProgress) {
	if p.console == nil || p.finished {
		return
	}
	var rows, sent int64
	for _, r := range ranks {
		rows += r.takenRows
		sent += r.rows
		ss, rate, ok := addSample(p.samples[r.rank], sample{now, r.takenRows})
		p.samples[r.rank] = ss
		if ok {
			p.rates[r.rank] = rate
		}
	}
	var ok bool
	var rate float64
	if p.total, rate, ok = addSample(p.total, sample{now, rows}); ok {
		p.rate = rate
	}
	p.rows, p.sent = rows, sent
	line := p.render(now, ranks)
	switch {
	case p.console.Terminal():
		p.console.Live(line)
	case now.Sub(p.last) >= p.interval:
		p.console.Eprintln(line)
		p.last = now
	}
}

// diverged is how far (as a share of the leading rank's rows) the slowest
// rank must trail before the line names it.
const diverged = 0.05

func (p *progress) render(now time.Time, ranks []rankProgress) string {
	var b strings.Builder
	minEpoch := int32(-1)
	var slowest, leader *rankProgress
	var others []string // ranks that feed nothing, by name
	for i := range ranks {
		r := &ranks[i]
		if !r.role.Feeds() {
			state := "running"
			if r.exited {
				state = "done"
			}
			others = append(others, fmt.Sprintf("%s: %s", rankName(r), state))
			continue
		}
		if r.exited {
			continue
		}
		if r.localizing != nil {
			// Not started: its epoch 0 says nothing yet.
			others = append(others, fmt.Sprintf("%s: %s", rankName(r), localizingMessage(r.localizing)))
			continue
		}
		if minEpoch < 0 || r.epoch < minEpoch {
			minEpoch = r.epoch
		}
		if slowest == nil || r.takenRows < slowest.takenRows {
			slowest = r
		}
		if leader == nil || r.takenRows > leader.takenRows {
			leader = r
		}
	}
	switch {
	case (minEpoch < 0 || p.expect == 0) && p.rows == 0 && p.sent == 0:
		// No rank feeding yet (or a job without input): no epoch to name.
		fmt.Fprintf(&b, "progress: no rows yet, %s elapsed", now.Sub(p.start).Round(time.Second))
		for _, o := range others {
			fmt.Fprintf(&b, " | %s", o)
		}
		return b.String()
	case minEpoch < 0:
		// Every feeding rank is done.
		minEpoch = int32(p.epochs - 1)
	}
	fmt.Fprintf(&b, "progress: epoch %d/%d, %s rows, %s rows/s", minEpoch+1, p.epochs, humanCount(p.rows), humanCount(int64(p.rate+0.5)))
	if p.expect > 0 && p.rows < p.expect && p.rate > 0 {
		eta := time.Duration(float64(p.expect-p.rows) / p.rate * float64(time.Second))
		fmt.Fprintf(&b, ", ETA %s", eta.Round(time.Second))
	}
	fmt.Fprintf(&b, ", %s elapsed", now.Sub(p.start).Round(time.Second))
	if slowest != nil && leader != nil && slowest != leader &&
		(slowest.epoch < leader.epoch || float64(leader.takenRows-slowest.takenRows) > diverged*float64(leader.takenRows)) {
		fmt.Fprintf(&b, " | slowest: %s (epoch %d, %s rows, %s rows/s)", rankName(slowest), slowest.epoch+1,
			humanCount(slowest.takenRows), humanCount(int64(p.rates[slowest.rank]+0.5)))
	}
	if ahead := p.sent - p.rows; ahead > 0 {
		fmt.Fprintf(&b, " | read ahead: %s rows", humanCount(ahead))
	}
	for _, o := range others {
		fmt.Fprintf(&b, " | %s", o)
	}
	return b.String()
}

// rankName names a rank as the user knows it: its role and rank within
// it in a job with roles, else its rank.
func rankName(r *rankProgress) string {
	if r.name != "" {
		return r.name
	}
	return fmt.Sprintf("rank %d", r.rank)
}

// finish ends a live line so later output starts on a fresh line.
func (p *progress) finish() {
	if p.console != nil && !p.finished {
		p.console.EndLive()
	}
	p.finished = true
}

// totalRows returns the rows written to the feed sockets: at the end of a
// job, every row fed.
func (p *progress) totalRows() int64 { return p.sent }

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
