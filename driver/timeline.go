package driver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// traceWriter writes the job's timeline in Chrome's trace event format (a
// JSON array of events, which Perfetto and chrome://tracing open): one
// process per rank, one thread per category of span. Spans are written as
// they arrive, into a temporary file beside the timeline's path that
// replaces it at the job's end; a driver that dies leaves that file, which
// still opens (the format allows a missing "]").
type traceWriter struct {
	mu     sync.Mutex
	path   string
	tmp    *os.File
	buf    *bufio.Writer
	named  map[int]bool
	tids   map[string]int
	err    error
	events int
}

// newTraceWriter creates the timeline file at path (its directory must
// exist). It is written beside path and renamed over it on Close, so a
// previous timeline of the same name stays whole until then.
func newTraceWriter(path string) (*traceWriter, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("spindle.timeline %s: %w", path, err)
	}
	w := &traceWriter{path: path, tmp: f, buf: bufio.NewWriterSize(f, 1<<16), named: map[int]bool{}, tids: map[string]int{}}
	_, _ = w.buf.WriteString("[\n")
	return w, nil
}

// traceEvent is one entry of the trace's JSON array.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   int64          `json:"ts,omitempty"`
	Dur  int64          `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// add writes a rank's spans; the first of a rank names its process.
func (w *traceWriter) add(rank int, role string, spans []*driverpb.Span) {
	if w == nil || len(spans) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.named[rank] {
		w.named[rank] = true
		name := fmt.Sprintf("rank %d", rank)
		if role != "" {
			name += " (" + role + ")"
		}
		w.write(traceEvent{Name: "process_name", Ph: "M", PID: rank, Args: map[string]any{"name": name}})
		w.write(traceEvent{Name: "process_sort_index", Ph: "M", PID: rank, Args: map[string]any{"sort_index": rank}})
	}
	for _, s := range spans {
		tid, ok := w.tids[s.GetCat()]
		if !ok {
			tid = len(w.tids) + 1
			w.tids[s.GetCat()] = tid
		}
		w.write(traceEvent{Name: s.GetName(), Cat: s.GetCat(), Ph: "X", TS: s.GetStartMicros(), Dur: max(s.GetDurationMicros(), 1), PID: rank, TID: tid})
	}
}

func (w *traceWriter) write(ev traceEvent) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	if w.events > 0 {
		_, _ = w.buf.WriteString(",\n")
	}
	w.events++
	_, w.err = w.buf.Write(b)
}

// Close names the threads, ends the array and puts the file in place.
func (w *traceWriter) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for rank := range w.named {
		for cat, tid := range w.tids {
			w.write(traceEvent{Name: "thread_name", Ph: "M", PID: rank, TID: tid, Args: map[string]any{"name": cat}})
		}
	}
	_, _ = w.buf.WriteString("\n]\n")
	err := w.err
	if ferr := w.buf.Flush(); err == nil {
		err = ferr
	}
	if serr := w.tmp.Sync(); err == nil {
		err = serr
	}
	if cerr := w.tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(w.tmp.Name())
		return fmt.Errorf("write the timeline %s: %w", w.path, err)
	}
	if err := os.Rename(w.tmp.Name(), w.path); err != nil {
		_ = os.Remove(w.tmp.Name())
		return fmt.Errorf("write the timeline %s: %w", w.path, err)
	}
	return nil
}
