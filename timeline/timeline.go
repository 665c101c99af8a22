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
const (
	maxBatchSpans = 200
	flushEvery    = 200 * time.Millisecond
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
		r.flushLocked()
		return
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(flushEvery, Flush)
	} else {
		r.timer.Reset(flushEvery)
	}
}

// Flush sends the spans recorded so far. Programs that end right after
// their last span call it; spans are otherwise sent in batches.
func Flush() {
	if r := get(); r != nil {
		r.mu.Lock()
		r.flushLocked()
		r.mu.Unlock()
	}
}

func (r *recorder) flushLocked() {
	r.last = time.Now()
	if len(r.pending) == 0 {
		return
	}
	msg, err := json.Marshal(struct {
		Spans []Span `json:"spans"`
	}{r.pending})
	r.pending = r.pending[:0]
	if err != nil {
		return
	}
	if r.conn == nil {
		conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: r.path, Net: "unixgram"})
		if err != nil {
			r.dropped++
			return
		}
		r.conn = conn
	}
	if err := sendNow(r.conn, msg); err != nil {
		r.dropped++
	}
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
		return errors.New("timeline: the executor's queue is full")
	}
	return werr
}
