package jobview

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// Limits that keep a job's model bounded however long it runs and however
// many ranks it has: memory grows with ranks, never with time.
const (
	// LogLinesKept is how many recent lines of each rank's stream a Job keeps.
	LogLinesKept = 2000
	// SeriesPointsKept is how many points each chart keeps; older points
	// are thinned by half when it fills.
	SeriesPointsKept = 600
	// LogBytesKept is the text of output lines a Job keeps across all its
	// ranks' streams: each stream keeps its share (at least
	// minStreamLogBytes), so a job of a thousand ranks keeps fewer lines of
	// each than a job of four.
	LogBytesKept      = 32 << 20
	minStreamLogBytes = 16 << 10
)

// Summary is one row of a job list.
type Summary struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	User     string    `json:"user"`
	Mode     string    `json:"mode"`
	State    string    `json:"state"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end,omitempty"`
	Duration float64   `json:"duration_seconds"`
}

// Snapshot is everything a job page shows at one moment.
type Snapshot struct {
	Summary
	Reason     string            `json:"reason,omitempty"`
	Command    []string          `json:"command"`
	Settings   map[string]string `json:"settings,omitempty"`
	Push       *PushInput        `json:"push,omitempty"`
	Roles      map[string]int    `json:"roles,omitempty"`
	Generation int               `json:"generation"`
	Ranks      []RankView        `json:"ranks"`
	// RankCount is how many ranks the job has and RankStates how many
	// are in each state; Ranks may be a page of them from RankOffset on
	// (PageRanks).
	RankCount  int                `json:"rank_count"`
	RankStates map[string]int     `json:"rank_states,omitempty"`
	RankOffset int                `json:"rank_offset"`
	Throughput []Point            `json:"throughput"`
	Scalars    map[string][]Point `json:"scalars,omitempty"`
	Slowest    *int               `json:"slowest_rank,omitempty"`
	Totals     map[string]float64 `json:"totals"`
	// Models are the model versions the job published, oldest first.
	Models []SavedModel `json:"models,omitempty"`
	// SlowLinks are the links between training processes that Spindle's
	// collectives found slow (task.Comm reports them), the latest report
	// of each pair first by round trip.
	SlowLinks []SlowLink `json:"slow_links,omitempty"`
	// LeftRanks are the rows of the ranks an elastic job went on without
	// in place, as they were when each left, in the order they left.
	LeftRanks []RankView `json:"left_ranks,omitempty"`
	// Changes is the job's timeline: its restarts, ranks replaced alone
	// and renumberings, oldest first (the newest ChangesKept).
	Changes []Change `json:"changes,omitempty"`
}

// SlowLink is a link between two ranks whose probes were slow.
type SlowLink struct {
	Rank int `json:"rank"` // the rank that measured it
	Peer int `json:"peer"`
	// RoundTripMS is the last probe's round trip, in milliseconds.
	RoundTripMS float64 `json:"round_trip_ms"`
	// T is when it was reported, in seconds since the job started.
	T float64 `json:"t"`
}

// SavedModel is a model version a rank of the job published.
type SavedModel struct {
	ModelRef
	Rank int       `json:"rank"`
	Time time.Time `json:"time"`
}

// ModelsKept bounds the saved models a Job lists: the newest are kept.
const ModelsKept = 1000

// RankView is one row of the ranks table.
type RankView struct {
	Rank        int     `json:"rank"`
	Role        string  `json:"role"`
	RoleRank    int     `json:"role_rank"`
	Host        string  `json:"host"`
	Executor    string  `json:"executor"`
	State       string  `json:"state"`
	Message     string  `json:"message,omitempty"`
	Restarts    int     `json:"restarts"`
	Epoch       int64   `json:"epoch"`
	Rows        int64   `json:"rows"`
	Batches     int64   `json:"batches"`
	Bytes       int64   `json:"bytes"`
	RowsPerSec  float64 `json:"rows_per_second"`
	BytesPerSec float64 `json:"bytes_per_second"`
	StepsPerSec float64 `json:"steps_per_second"`
	CPUPercent  float64 `json:"cpu_percent"`
	MemoryBytes int64   `json:"memory_bytes"`
	// GPUs is how many of the rank's GPUs were sampled; 0 says its GPU
	// use is not known (it has none, or its executor no nvidia-smi), and
	// then GPUUtilRatio and GPUMemoryBytes mean nothing.
	GPUs           int       `json:"gpus,omitempty"`
	GPUUtilRatio   float64   `json:"gpu_util_ratio,omitempty"`
	GPUMemoryBytes int64     `json:"gpu_memory_bytes,omitempty"`
	LastHeartbeat  time.Time `json:"last_heartbeat,omitempty"`
	// FormerRanks are the numbers the rank's process had before an
	// elastic job renumbered its ranks in place, oldest first.
	FormerRanks []int `json:"former_ranks,omitempty"`
}

// Point is one sample of a chart.
type Point struct {
	T float64 `json:"t"` // seconds since the job started
	V float64 `json:"v"`
	// Rank is the rank that reported a value (reported values only: every
	// rank may report the same name, and each rank's values are a line of
	// their own on the chart).
	Rank *int `json:"rank,omitempty"`
}

// LogChunk is part of a rank's output: lines numbered from First.
type LogChunk struct {
	First int64    `json:"first"`
	Next  int64    `json:"next"`
	Lines []string `json:"lines"`
	// Truncated says lines before First were dropped (only the last
	// LogLinesKept are kept).
	Truncated bool `json:"truncated"`
}

// Job is a job's model, built by applying events in order. It is safe for
// concurrent use: the driver applies events while the UI reads snapshots.
type Job struct {
	mu         sync.RWMutex
	info       Info
	state      string
	reason     string
	start, end time.Time
	generation int
	ranks      map[int]*rankState
	throughput series
	scalars    map[string]*series
	models     []SavedModel
	left       []RankView // ranks gone on without in place
	changes    []Change
	tp         throughputSampler
	// rows is the sum of the ranks' rows, kept as they report so that a
	// report costs the same in a job of ten ranks as in one of thousands.
	rows int64
}

type rankState struct {
	view RankView
	last *Progress
	at   time.Time
	logs map[string]*lineRing
}

// NewJob returns an empty model; the first event applied is usually
// KindSubmitted.
func NewJob() *Job {
	return &Job{state: StateSubmitted, ranks: map[int]*rankState{}, scalars: map[string]*series{}}
}

// Replay builds a Job from a finished or running job's events.
func Replay(events []Event) *Job {
	j := NewJob()
	for _, ev := range events {
		j.Apply(ev)
	}
	return j
}

// ID returns the job's id.
func (j *Job) ID() string {
	j.mu.RLock()
	defer j.mu.RUnlock()
	return j.info.ID
}

// Apply folds one event into the model.
func (j *Job) Apply(ev Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch ev.Kind {
	case KindSubmitted:
		if ev.Info != nil {
			j.info = *ev.Info
		}
		j.start = ev.Time
	case KindJobState:
		j.state = ev.State
		if ev.Reason != "" {
			j.reason = ev.Reason
		}
		if isFinal(ev.State) {
			j.end = ev.Time
		}
	case KindRestart:
		j.generation = ev.Generation
		for _, r := range j.ranks {
			r.view.Restarts++
			r.view.FormerRanks = nil // a new gang's processes
		}
		j.addChange(ev, "every rank restarted: "+ev.Reason)
	case KindReplace:
		j.rank(ev.Rank).view.Restarts++
		j.addChange(ev, ev.Reason)
	case KindRenumber:
		j.renumber(ev)
	case KindExecutor:
		r := j.rank(ev.Rank)
		if ev.Role != "" {
			r.view.Role, r.view.RoleRank = ev.Role, ev.RoleRank
		}
		if ev.Host != "" {
			r.view.Host = ev.Host
		}
		if ev.Executor != "" {
			r.view.Executor = ev.Executor
		}
		if ev.State != "" {
			r.view.State = ev.State
		}
		r.view.Message = ev.Message
	case KindProgress:
		if ev.Progress != nil {
			j.progress(ev.Time, j.rank(ev.Rank), *ev.Progress)
		}
	case KindScalars:
		for name, v := range ev.Values {
			s := j.scalars[name]
			if s == nil {
				s = &series{}
				j.scalars[name] = s
			}
			rank := ev.Rank
			s.add(Point{T: j.since(ev.Time), V: v, Rank: &rank})
		}
	case KindModelSaved:
		if ev.Model != nil {
			if len(j.models) >= ModelsKept {
				j.models = j.models[1:]
			}
			j.models = append(j.models, SavedModel{ModelRef: *ev.Model, Rank: ev.Rank, Time: ev.Time})
		}
	case KindLog:
		r := j.rank(ev.Rank)
		ring := r.logs[ev.Stream]
		if ring == nil {
			ring = &lineRing{maxBytes: j.streamLogBytes()}
			r.logs[ev.Stream] = ring
		}
		ring.add(ev.Line)
	}
}

// streamLogBytes is each stream's share of LogBytesKept.
func (j *Job) streamLogBytes() int {
	streams := 2 * max(j.info.WorldSize, len(j.ranks), 1)
	return max(LogBytesKept/streams, minStreamLogBytes)
}

func (j *Job) rank(n int) *rankState {
	r := j.ranks[n]
	if r == nil {
		r = &rankState{view: RankView{Rank: n, Role: "worker", State: RankPending}, logs: map[string]*lineRing{}}
		j.ranks[n] = r
	}
	return r
}

func (j *Job) since(t time.Time) float64 {
	if j.start.IsZero() {
		return 0
	}
	return t.Sub(j.start).Seconds()
}

// progress updates a rank's counters and rates, and the job's throughput chart.
func (j *Job) progress(at time.Time, r *rankState, p Progress) {
	if r.last != nil {
		if dt := at.Sub(r.at).Seconds(); dt > 0 {
			r.view.RowsPerSec = float64(p.Rows-r.last.Rows) / dt
			r.view.BytesPerSec = float64(p.Bytes-r.last.Bytes) / dt
			r.view.StepsPerSec = float64(p.Steps-r.last.Steps) / dt
			r.view.CPUPercent = 100 * (p.CPUSeconds - r.last.CPUSeconds) / dt
		}
	}
	last := p
	r.last, r.at = &last, at
	j.rows += p.Rows - r.view.Rows
	r.view.Epoch, r.view.Rows, r.view.Batches, r.view.Bytes = p.Epoch, p.Rows, p.Batches, p.Bytes
	r.view.MemoryBytes = p.MemoryBytes
	r.view.GPUs, r.view.GPUUtilRatio, r.view.GPUMemoryBytes = p.GPUs, p.GPUUtilRatio, p.GPUMemoryBytes
	r.view.LastHeartbeat = at
	if r.view.State == RankPending {
		r.view.State = RankRunning
	}
	j.sampleThroughput(at)
}

// sampleThroughput adds to the throughput chart at most one point a
// second. Ranks report one by one, so updates within a second of a point
// revise it instead of starting another: a point's rate counts every rank
// that reported since the previous point.
func (j *Job) sampleThroughput(at time.Time) {
	total := j.rows
	tp := &j.tp
	switch {
	case tp.last.at.IsZero():
		// The first report only sets where rates count from.
	case tp.open && at.Sub(tp.openedAt) < time.Second:
		if dt := at.Sub(tp.ref.at).Seconds(); dt > 0 {
			j.throughput.pts[len(j.throughput.pts)-1] = Point{T: j.since(at), V: float64(total-tp.ref.rows) / dt}
		}
	case at.After(tp.last.at):
		tp.ref = tp.last
		j.throughput.add(Point{T: j.since(at), V: float64(total-tp.ref.rows) / at.Sub(tp.ref.at).Seconds()})
		tp.open, tp.openedAt = true, at
	}
	tp.last = sampleAt{at, total}
}

// sampleAt is the job's total rows at one moment.
type sampleAt struct {
	at   time.Time
	rows int64
}

// throughputSampler is where the throughput chart's next point counts from.
type throughputSampler struct {
	ref, last sampleAt
	open      bool
	openedAt  time.Time
}

// Summary returns the job's list row as of now.
func (j *Job) Summary(now time.Time) Summary {
	j.mu.RLock()
	defer j.mu.RUnlock()
	return j.summary(now)
}

func (j *Job) summary(now time.Time) Summary {
	s := Summary{ID: j.info.ID, Name: j.info.Name, User: j.info.User, Mode: j.info.Mode,
		State: j.state, Start: j.start, End: j.end}
	end := j.end
	if end.IsZero() {
		end = now
	}
	if !j.start.IsZero() {
		s.Duration = end.Sub(j.start).Seconds()
	}
	return s
}

// Snapshot returns what the job page shows as of now.
func (j *Job) Snapshot(now time.Time) Snapshot {
	j.mu.RLock()
	defer j.mu.RUnlock()
	s := Snapshot{Summary: j.summary(now), Reason: j.reason, Command: j.info.Command,
		Settings: j.info.Settings, Push: j.info.Push, Roles: j.info.Roles, Generation: j.generation,
		Throughput: j.throughput.points(), Totals: map[string]float64{}}
	ids := make([]int, 0, len(j.ranks))
	for n := range j.ranks {
		ids = append(ids, n)
	}
	sort.Ints(ids)
	var rows, rps float64
	var slowest *int
	var slowRate, fastRate float64
	for _, n := range ids {
		v := j.ranks[n].view
		s.Ranks = append(s.Ranks, v)
		rows += float64(v.Rows)
		rps += v.RowsPerSec
		if v.State != RankRunning || v.Role != "worker" {
			continue
		}
		if slowest == nil || v.RowsPerSec < slowRate {
			n := n
			slowest, slowRate = &n, v.RowsPerSec
		}
		if v.RowsPerSec > fastRate {
			fastRate = v.RowsPerSec
		}
	}
	// A rank is called out only when ranks diverge noticeably (the slowest
	// below 80% of the fastest).
	if slowest != nil && fastRate > 0 && slowRate < 0.8*fastRate {
		s.Slowest = slowest
	}
	for _, v := range j.left {
		rows += float64(v.Rows)
	}
	s.LeftRanks = append([]RankView(nil), j.left...)
	s.Changes = append([]Change(nil), j.changes...)
	s.Totals["rows"], s.Totals["rows_per_second"] = rows, rps
	if len(j.scalars) > 0 {
		s.Scalars = map[string][]Point{}
		for name, ser := range j.scalars {
			s.Scalars[name] = ser.points()
		}
	}
	s.Models = append([]SavedModel(nil), j.models...)
	s.SlowLinks = j.slowLinks()
	return s
}

// slowLinks lists the latest slow-link report of each pair of ranks, the
// slowest first; j.mu is held.
func (j *Job) slowLinks() []SlowLink {
	latest := map[[2]int]SlowLink{}
	for name, ser := range j.scalars {
		peer, err := strconv.Atoi(strings.TrimPrefix(name, envcontract.SlowLinkScalar))
		if err != nil || !strings.HasPrefix(name, envcontract.SlowLinkScalar) {
			continue
		}
		for _, p := range ser.pts {
			if p.Rank == nil {
				continue
			}
			pair := [2]int{min(*p.Rank, peer), max(*p.Rank, peer)}
			if old, ok := latest[pair]; !ok || p.T >= old.T {
				latest[pair] = SlowLink{Rank: *p.Rank, Peer: peer, RoundTripMS: p.V, T: p.T}
			}
		}
	}
	var out []SlowLink
	for _, l := range latest {
		out = append(out, l)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].RoundTripMS != out[b].RoundTripMS {
			return out[a].RoundTripMS > out[b].RoundTripMS
		}
		return out[a].Rank < out[b].Rank
	})
	return out
}

// Log returns rank's stream from line number from on (0: everything kept).
func (j *Job) Log(rank int, stream string, from int64) (LogChunk, bool) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	r := j.ranks[rank]
	if r == nil {
		return LogChunk{}, false
	}
	ring := r.logs[stream]
	if ring == nil {
		return LogChunk{Lines: []string{}}, true
	}
	return ring.from(from), true
}

// Ranks returns the ranks the job knows, in order.
func (j *Job) Ranks() []int {
	j.mu.RLock()
	defer j.mu.RUnlock()
	ids := make([]int, 0, len(j.ranks))
	for n := range j.ranks {
		ids = append(ids, n)
	}
	sort.Ints(ids)
	return ids
}

func isFinal(state string) bool {
	return state == StateSucceeded || state == StateFailed || state == StateKilled
}

// IsFinal reports whether a job state is one a job ends in.
func IsFinal(state string) bool { return isFinal(state) }

// series is a bounded chart: when full, every other point is dropped, so a
// long job keeps its whole shape at a coarser grain.
type series struct{ pts []Point }

func (s *series) add(p Point) {
	if len(s.pts) >= SeriesPointsKept {
		kept := s.pts[:0]
		for i := 0; i < len(s.pts); i += 2 {
			kept = append(kept, s.pts[i])
		}
		s.pts = kept
	}
	s.pts = append(s.pts, p)
}

func (s *series) points() []Point { return append([]Point(nil), s.pts...) }

// lineRing keeps the last lines of a stream, at most LogLinesKept and at
// most maxBytes of text, with their numbers.
type lineRing struct {
	lines    []string // lines[head:] are kept; the rest await compaction
	head     int
	bytes    int   // memory the kept lines hold (lineCost each)
	next     int64 // number of the next line added
	maxBytes int
}

func (r *lineRing) add(line string) {
	r.lines = append(r.lines, line)
	r.bytes += lineCost(line)
	r.next++
	for len(r.lines)-r.head > 1 && (len(r.lines)-r.head > LogLinesKept || r.bytes > r.maxBytes) {
		r.bytes -= lineCost(r.lines[r.head])
		r.lines[r.head] = ""
		r.head++
	}
	if r.head > len(r.lines)/2 && r.head > 64 {
		r.lines = append(r.lines[:0:0], r.lines[r.head:]...)
		r.head = 0
	}
}

// lineCost is about the memory a kept line holds: its text, its string
// header and its share of the ring's slice.
func lineCost(line string) int { return len(line) + 32 }

func (r *lineRing) from(n int64) LogChunk {
	kept := r.lines[r.head:]
	first := r.next - int64(len(kept))
	c := LogChunk{Next: r.next, Truncated: first > 0 && n < first, Lines: []string{}}
	n = max(min(n, r.next), first)
	c.First = n
	c.Lines = append(c.Lines, kept[n-first:]...)
	return c
}

// secretWords mark configuration keys whose values are hidden.
var secretWords = []string{"secret", "password", "token", "keytab", "credential", "private"}

// Redact returns settings with the values of secret-looking keys hidden.
func Redact(settings map[string]string) map[string]string {
	out := make(map[string]string, len(settings))
	for k, v := range settings {
		lk := strings.ToLower(k)
		for _, w := range secretWords {
			if strings.Contains(lk, w) {
				v = "*****"
				break
			}
		}
		out[k] = v
	}
	return out
}
