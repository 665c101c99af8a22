package timeline

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// Categories of spans.
const (
	// CatFeed is time a process waited for its next batch.
	CatFeed = "feed"
	// CatCollective is a collective operation (allreduce, broadcast, ...).
	CatCollective = "collective"
	// CatCheckpoint is a checkpoint save or load.
	CatCheckpoint = "checkpoint"
)

// Span is one recorded interval, as sent to the executor.
type Span struct {
	Name string `json:"name"`
	Cat  string `json:"cat"`
	// TS is the start in microseconds since the Unix epoch; Dur the length
	// in microseconds.
	TS  int64 `json:"ts"`
	Dur int64 `json:"dur"`
}

// Bounds of a batch: a datagram stays well under the socket's limits.
// Spans the executor's queue has no room for wait, up to maxPendingSpans
// (past it the oldest are dropped); Flush waits up to flushWait for room.
const (
	maxBatchSpans   = 200
	maxPendingSpans = 20000
	flushEvery      = 200 * time.Millisecond
	flushWait       = 2 * time.Second
)

// recorder batches spans for the executor; nil when not recording.
type recorder struct {
	mu      sync.Mutex
	path    string
	conn    *net.UnixConn
	pending []Span
	last    time.Time
	timer   *time.Timer // sends what waits when no new span comes
	dropped int64
}

var (
	once sync.Once
	rec  *recorder
)

// get returns the process's recorder, or nil when its executor did not ask
// for a timeline.
func get() *recorder {
	once.Do(func() {
		if os.Getenv(envcontract.Timeline) != "1" {
			return
		}
		if path := os.Getenv(envcontract.ReportSocket); path != "" {
			rec = &recorder{path: path, last: time.Now()}
		}
	})
	return rec
}

// Enabled reports whether this process records a timeline.
func Enabled() bool { return get() != nil }

// Start begins a span; calling the returned function ends and records it.
// When not recording, both cost next to nothing.
func Start(cat, name string) func() {
	r := get()
	if r == nil {
		return func() {}
	}
	start := time.Now()
	return func() {
		r.add(Span{Name: name, Cat: cat, TS: start.UnixMicro(), Dur: time.Since(start).Microseconds()})
	}
}

func (r *recorder) add(s Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, s)
	if len(r.pending) >= maxBatchSpans || time.Since(r.last) >= flushEvery {
		r.flushLocked(0)
		if len(r.pending) == 0 {
			return
		}
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(flushEvery, r.flushSoon)
	} else {
		r.timer.Reset(flushEvery)
	}
}

// Flush sends the spans recorded so far, waiting a moment (2 s at most)
// for room in the executor's queue. Programs that end right after their
// last span call it; spans are otherwise sent in batches.
func Flush() {
	if r := get(); r != nil {
		r.mu.Lock()
		r.flushLocked(flushWait)
		r.mu.Unlock()
	}
}

// flushSoon sends what waits without waiting, and tries again later if the
// executor's queue is full.
func (r *recorder) flushSoon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked(0)
	if len(r.pending) > 0 {
		r.timer.Reset(flushEvery)
	}
}

// flushLocked sends the pending spans in batches, waiting up to wait for
// room; what the queue cannot take stays pending.
func (r *recorder) flushLocked(wait time.Duration) {
	r.last = time.Now()
	if len(r.pending) == 0 {
		return
	}
	if r.conn == nil {
		conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: r.path, Net: "unixgram"})
		if err != nil {
			r.dropped += int64(len(r.pending))
			r.pending = r.pending[:0]
			return
		}
		r.conn = conn
	}
	deadline := time.Now().Add(wait)
	sent := 0
	for sent < len(r.pending) {
		batch := r.pending[sent:min(sent+maxBatchSpans, len(r.pending))]
		msg, err := json.Marshal(struct {
			Spans []Span `json:"spans"`
		}{batch})
		if err == nil {
			err = send(r.conn, msg, deadline)
		}
		if errors.Is(err, errQueueFull) {
			break
		}
		if err != nil {
			r.dropped += int64(len(batch)) // the executor is gone
		}
		sent += len(batch)
	}
	left := copy(r.pending, r.pending[sent:])
	r.pending = r.pending[:left]
	if over := len(r.pending) - maxPendingSpans; over > 0 {
		r.dropped += int64(over)
		r.pending = r.pending[:copy(r.pending, r.pending[over:])]
	}
}

var errQueueFull = errors.New("timeline: the executor's queue is full")

// send writes one datagram, waiting for room in the executor's queue
// until deadline (not at all when it has passed).
func send(conn *net.UnixConn, msg []byte, deadline time.Time) error {
	if !time.Now().Before(deadline) {
		return sendNow(conn, msg)
	}
	_ = conn.SetWriteDeadline(deadline)
	_, err := conn.Write(msg)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errQueueFull
	}
	return err
}

// sendNow writes one datagram without waiting for room.
func sendNow(conn *net.UnixConn, msg []byte) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := raw.Write(func(fd uintptr) bool {
		_, werr = syscall.Write(int(fd), msg)
		return true
	}); err != nil {
		return err
	}
	if errors.Is(werr, syscall.EAGAIN) {
		return errQueueFull
	}
	return werr
}
