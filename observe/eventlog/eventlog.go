package eventlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// File names inside a job's directory.
const (
	completeName  = "events.jsonl"
	segmentPrefix = "part-"
	segmentSuffix = ".jsonl"
)

// DefaultFlushInterval is how often a running job's events are published.
const DefaultFlushInterval = 10 * time.Second

// Writer appends a job's events to its log. Record never blocks on the
// file system: a goroutine that the Writer starts and Close waits for
// publishes segments.
type Writer struct {
	fsys     fsys.FS
	dir      string // the job's directory inside fsys
	interval time.Duration
	logger   *slog.Logger

	mu        sync.Mutex
	lines     map[logStream]int       // output lines recorded
	progress  map[string]heldProgress // by rank and kind (progress.go)
	worldSize int                     // the job's ranks, once submitted
	pending   bytes.Buffer
	segments  int
	closed    bool
	kick      chan struct{}
	done      chan struct{}
	wg        sync.WaitGroup
}

// NewWriter opens the event log of job under dirURI (created when missing).
func NewWriter(ctx context.Context, res *fsys.Resolver, dirURI, job string, interval time.Duration, logger *slog.Logger) (*Writer, error) {
	if strings.ContainsAny(job, "/\\") || job == "" || job == "." || job == ".." {
		return nil, fmt.Errorf("eventlog: job id %q cannot name a directory", job)
	}
	fs, dir, err := res.Resolve(ctx, dirURI)
	if err != nil {
		return nil, fmt.Errorf("event log directory %s: %w", dirURI, err)
	}
	jobDir := path.Join(dir, job)
	if err := fsys.MkdirPrivate(ctx, fs, jobDir); err != nil {
		return nil, fmt.Errorf("create event log directory %s: %w", fsys.JoinURI(dirURI, job), err)
	}
	if interval <= 0 {
		interval = DefaultFlushInterval
	}
	if logger == nil {
		logger = slog.Default()
	}
	w := &Writer{fsys: fs, dir: jobDir, interval: interval, logger: logger.With("component", "eventlog"),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run(ctx)
	}()
	return w, nil
}

// MaxLogLines is how many output lines of each rank's stream a job's log
// keeps (for spindle logs and the history's log pages); past it one line
// says the rest was left out, so a chatty rank cannot swamp the history.
const MaxLogLines = 20000

// Record adds an event.
func (w *Writer) Record(ev jobview.Event) {
	if ev.Kind == jobview.KindLog && !w.keepLine(&ev) {
		return
	}
	line, err := json.Marshal(ev)
	if err != nil {
		w.logger.Warn("event not recorded", "kind", ev.Kind, "err", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.holdLocked(&ev, line) {
		return
	}
	final := ev.Kind == jobview.KindJobState && jobview.IsFinal(ev.State)
	if final || ev.Kind == jobview.KindRenumber {
		// The ranks' last counters come before the job's end, and under
		// the ranks' old numbers before they are renumbered.
		w.releaseProgressLocked()
	}
	w.pending.Write(line)
	w.pending.WriteByte('\n')
	// A job's end is published at once, not at the next tick.
	if final {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// run publishes segments every interval until Close (or ctx ends).
func (w *Writer) run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.done:
			return
		case <-t.C:
		case <-w.kick:
		}
		if err := w.flush(ctx); err != nil {
			w.logger.Warn("event log segment not written", "dir", w.dir, "err", err)
		}
	}
}

// flush publishes what was recorded since the last flush as a new segment.
func (w *Writer) flush(ctx context.Context) error {
	w.mu.Lock()
	w.releaseProgressLocked()
	if w.pending.Len() == 0 {
		w.mu.Unlock()
		return nil
	}
	data := bytes.Clone(w.pending.Bytes())
	w.pending.Reset()
	w.segments++
	name := path.Join(w.dir, fmt.Sprintf("%s%06d%s", segmentPrefix, w.segments, segmentSuffix))
	w.mu.Unlock()
	if err := writeAtomic(ctx, w.fsys, name, data); err != nil {
		// Put the events back so the next flush (or Close) retries them.
		w.mu.Lock()
		w.segments--
		rest := bytes.Clone(w.pending.Bytes())
		w.pending.Reset()
		w.pending.Write(data)
		w.pending.Write(rest)
		w.mu.Unlock()
		return err
	}
	return nil
}

// Close stops the flushing goroutine, publishes the remaining events and
// folds the segments into one file.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.done)
	w.mu.Unlock()
	w.wg.Wait()
	if err := w.flush(ctx); err != nil {
		return fmt.Errorf("write the event log's last events: %w", err)
	}
	events, err := readDir(ctx, w.fsys, w.dir)
	if err != nil {
		return err
	}
	var all bytes.Buffer
	for _, ev := range events {
		line, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		all.Write(line)
		all.WriteByte('\n')
	}
	if err := writeAtomic(ctx, w.fsys, path.Join(w.dir, completeName), all.Bytes()); err != nil {
		return fmt.Errorf("fold the event log of %s: %w", w.dir, err)
	}
	if err := writeSummary(ctx, w.fsys, w.dir, events); err != nil {
		// A history lists the job from its whole log instead.
		w.logger.Warn("event log summary not written", "dir", w.dir, "err", err)
	}
	// The folded file is complete; the segments are only clutter now, and
	// readers prefer the folded file if a removal fails.
	segs, err := segmentNames(ctx, w.fsys, w.dir)
	if err != nil {
		return err
	}
	for _, s := range segs {
		if err := w.fsys.Remove(ctx, s); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.logger.Warn("event log segment not removed", "segment", s, "err", err)
		}
	}
	return nil
}

func writeAtomic(ctx context.Context, f fsys.FS, name string, data []byte) error {
	af, err := fsys.CreatePrivate(ctx, f, name)
	if err != nil {
		return err
	}
	if _, err := af.Write(data); err != nil {
		_ = af.Abort()
		return err
	}
	return af.Commit()
}

// segmentNames lists a job directory's segments in order.
func segmentNames(ctx context.Context, f fsys.FS, dir string) ([]string, error) {
	infos, err := f.ReadDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list event log %s: %w", dir, err)
	}
	var names []string
	for _, fi := range infos {
		n := fi.Name()
		if strings.HasPrefix(n, segmentPrefix) && strings.HasSuffix(n, segmentSuffix) {
			names = append(names, path.Join(dir, n))
		}
	}
	sort.Strings(names) // zero-padded numbers sort in order
	return names, nil
}

// Job is one job found in an event log directory.
type Job struct {
	ID       string
	Complete bool // its log was folded: the driver finished writing it
	Modified time.Time
}

// List returns the jobs under dirURI, newest first.
func List(ctx context.Context, res *fsys.Resolver, dirURI string) ([]Job, error) {
	f, dir, err := res.Resolve(ctx, dirURI)
	if err != nil {
		return nil, fmt.Errorf("event log directory %s: %w", dirURI, err)
	}
	infos, err := f.ReadDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list event log directory %s: %w", dirURI, err)
	}
	var jobs []Job
	for _, fi := range infos {
		if !fi.IsDir() || strings.HasPrefix(fi.Name(), ".") {
			continue
		}
		j := Job{ID: fi.Name(), Modified: fi.ModTime()}
		if st, err := f.Stat(ctx, path.Join(dir, fi.Name(), completeName)); err == nil {
			j.Complete, j.Modified = true, st.ModTime()
		}
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].Modified.After(jobs[b].Modified) })
	return jobs, nil
}

// Read returns the events of job under dirURI.
func Read(ctx context.Context, res *fsys.Resolver, dirURI, job string) ([]jobview.Event, error) {
	f, dir, err := res.Resolve(ctx, dirURI)
	if err != nil {
		return nil, fmt.Errorf("event log directory %s: %w", dirURI, err)
	}
	return readDir(ctx, f, path.Join(dir, job))
}

func readDir(ctx context.Context, f fsys.FS, dir string) ([]jobview.Event, error) {
	names := []string{path.Join(dir, completeName)}
	if _, err := f.Stat(ctx, names[0]); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read event log %s: %w", dir, err)
		}
		if names, err = segmentNames(ctx, f, dir); err != nil {
			return nil, err
		}
	}
	var events []jobview.Event
	for _, n := range names {
		evs, err := readFile(ctx, f, n)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

func readFile(ctx context.Context, f fsys.FS, name string) ([]jobview.Event, error) {
	file, err := f.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("open event log %s: %w", name, err)
	}
	defer file.Close()
	var events []jobview.Event
	sc := bufio.NewScanner(io.Reader(file))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev jobview.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("event log %s line %d: %w", name, line, err)
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read event log %s: %w", name, err)
	}
	return events, nil
}

// logStream is one rank's stdout or stderr.
type logStream struct {
	rank   int
	stream string
}

// keepLine counts an output line and says whether to record it; the first
// line past MaxLogLines becomes a note that the rest is left out.
func (w *Writer) keepLine(ev *jobview.Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lines == nil {
		w.lines = map[logStream]int{}
	}
	k := logStream{ev.Rank, ev.Stream}
	w.lines[k]++
	switch n := w.lines[k]; {
	case n <= MaxLogLines:
		return true
	case n == MaxLogLines+1:
		ev.Line = fmt.Sprintf("(spindle: the event log keeps the first %d lines of this stream; the rest is in the executor's own log)", MaxLogLines)
		return true
	}
	return false
}
