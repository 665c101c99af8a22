package tfevents

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/fsys"
)

// DefaultPublishInterval is how often a SegmentWriter publishes the
// events written since its last segment.
const DefaultPublishInterval = 10 * time.Second

// SegmentWriter writes a run's events to a file system without a cheap
// append, such as HDFS. Each publish writes the events held since the last
// one as a new, complete event file, atomically:
// events.out.tfevents.UNIX.HOST.NNNNNN. TensorBoard reads a run's event
// files in name order and moves on to the next when one ends, and the
// zero-padded numbers sort in order, so it sees every event once, whether
// it reads while the job runs or after. Scalars never waits on the file
// system: a goroutine that Close waits for publishes every interval.
type SegmentWriter struct {
	fs       fsys.FS
	dir      string // the run's directory inside fs
	base     string // segment names' prefix: events.out.tfevents.UNIX.HOST
	interval time.Duration
	logger   *slog.Logger

	mu       sync.Mutex
	pending  []byte // framed records not published yet
	segments int
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
}

// CreateSegments makes dir inside fsys (a run's directory) and starts
// publishing the events written to the returned writer every interval
// (DefaultPublishInterval when not positive) until Close or ctx's end.
func CreateSegments(ctx context.Context, fs fsys.FS, dir, host string, now time.Time, interval time.Duration, logger *slog.Logger) (*SegmentWriter, error) {
	if err := fs.MkdirAll(ctx, dir); err != nil {
		return nil, fmt.Errorf("tensorboard: create %s: %w", dir, err)
	}
	if interval <= 0 {
		interval = DefaultPublishInterval
	}
	if logger == nil {
		logger = slog.Default()
	}
	w := &SegmentWriter{fs: fs, dir: dir, base: fmt.Sprintf("events.out.tfevents.%d.%s", now.Unix(), host),
		interval: interval, logger: logger, done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run(ctx)
	}()
	return w, nil
}

// Dir is the run's directory inside the file system.
func (w *SegmentWriter) Dir() string { return w.dir }

// Scalars holds one event with values (tag -> value) at step for the next
// segment.
func (w *SegmentWriter) Scalars(now time.Time, step int64, values map[string]float64) error {
	ev := scalarsEvent(now, step, values)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("tensorboard: %s is closed", w.dir)
	}
	w.pending = appendRecord(w.pending, ev)
	return nil
}

// run publishes every interval until Close or ctx's end.
func (w *SegmentWriter) run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.done:
			return
		case <-t.C:
		}
		if err := w.publish(ctx); err != nil {
			w.logger.Warn("tensorboard segment not written; its events go into the next", "dir", w.dir, "err", err)
		}
	}
}

// publish writes the held events as the next segment, keeping them for
// the next try when that fails.
func (w *SegmentWriter) publish(ctx context.Context) error {
	w.mu.Lock()
	if len(w.pending) == 0 {
		w.mu.Unlock()
		return nil
	}
	data := w.pending
	w.pending = nil
	seq := w.segments + 1
	w.mu.Unlock()
	name := path.Join(w.dir, fmt.Sprintf("%s.%06d", w.base, seq))
	err := writeSegment(ctx, w.fs, name, appendRecord(nil, versionEvent(time.Now())), data)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.pending = append(data, w.pending...)
		return err
	}
	w.segments = seq
	return nil
}

func writeSegment(ctx context.Context, fs fsys.FS, name string, parts ...[]byte) error {
	af, err := fs.CreateAtomic(ctx, name)
	if err != nil {
		return fmt.Errorf("tensorboard: create %s: %w", name, err)
	}
	for _, p := range parts {
		if _, err := af.Write(p); err != nil {
			_ = af.Abort()
			return fmt.Errorf("tensorboard: write %s: %w", name, err)
		}
	}
	if err := af.Commit(); err != nil {
		return fmt.Errorf("tensorboard: publish %s: %w", name, err)
	}
	return nil
}

// Close stops the publishing goroutine and publishes the events still
// held. Closing again does nothing.
func (w *SegmentWriter) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.done)
	w.mu.Unlock()
	w.wg.Wait()
	return w.publish(ctx)
}
