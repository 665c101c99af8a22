package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// spillStore keeps on local disk, as Arrow IPC files, the batches of
// Flight splits that do not fit in the memory cache, so that later epochs
// read them from there: a pulled flight is costly to fetch again, and
// pushed rows cannot be fetched again at all. It holds at most limit
// bytes of files in dir; a split that outgrows what is left is not kept
// (then a pulled flight is fetched again each epoch, and a pushed rank's
// later epochs fail saying so). Its files are removed when the pipeline
// closes.
type spillStore struct {
	dir   string
	limit int64
	alloc memory.Allocator // for the batches read back

	mu    sync.Mutex
	used  int64          // bytes of kept files and of files being written
	files map[int]string // kept, whole, by split
	// unfit are the splits that outgrew the room or failed to be
	// written, and why: they are not tried again.
	unfit  map[int]string
	closed bool
}

func newSpillStore(dir string, limit int64, alloc memory.Allocator) *spillStore {
	return &spillStore{dir: dir, limit: limit, alloc: alloc, files: map[int]string{}, unfit: map[int]string{}}
}

// file returns the kept file of split i, or "".
func (s *spillStore) file(i int) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[i]
}

// canTake reports whether split i may be written: it was not refused
// before and some room is left.
func (s *spillStore) canTake(i int) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, unfit := s.unfit[i]
	return !s.closed && !unfit && s.used < s.limit
}

// whyNot says why split i is not on disk, when it was refused.
func (s *spillStore) whyNot(i int) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unfit[i]
}

// reserve takes n more bytes of room for a file being written, or
// reports that there is not that much left.
func (s *spillStore) reserve(n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.used+n > s.limit {
		return false
	}
	s.used += n
	return true
}

// keep records the whole file of split i, written with the room reserved.
func (s *spillStore) keep(i int, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = os.Remove(path)
		return
	}
	s.files[i] = path
}

// refuse gives back a failed or abandoned file's room, removes the file
// (if any) and marks split i as not to be tried again, for why.
func (s *spillStore) refuse(i int, path string, reserved int64, why string) {
	if path != "" {
		_ = os.Remove(path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used -= reserved
	s.unfit[i] = why
}

// close removes every file; files written afterwards are removed as they
// are kept.
func (s *spillStore) close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	files := s.files
	s.files, s.used, s.closed = map[int]string{}, 0, true
	s.mu.Unlock()
	var errs []error
	for _, path := range files {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	_ = os.Remove(s.dir) // when empty: the store made it
	return errors.Join(errs...)
}

// stats returns the splits and bytes on disk.
func (s *spillStore) stats() (splits int, bytes int64) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.files), s.used
}

// spillWriter writes one split's batches to a file of the store, within
// the room it reserves as it goes. A goroutine of its own writes them, so
// that the epoch reading the split does not wait for the disk; write
// queues a batch (at most spillQueue wait, which bounds the memory they
// hold) and finish or abort waits for the goroutine.
type spillWriter struct {
	store *spillStore
	split int
	path  string
	queue chan arrow.RecordBatch
	done  chan struct{} // closed when the goroutine has ended
	// failed is set, with why, once a batch could not be written; the
	// goroutine then releases the rest unwritten.
	failed atomic.Bool

	// The goroutine's own until done is closed.
	f        *os.File
	w        *ipc.FileWriter
	reserved int64 // room taken in the store: the file's size when last written
	why      string
}

// spillQueue is how many batches a spill writer holds before write waits
// for the disk.
const spillQueue = 4

// newSpillWriter starts the file of split i, with the batches' schema.
func (s *spillStore) newSpillWriter(i int, schema *arrow.Schema) (*spillWriter, error) {
	s.mu.Lock()
	closed, full := s.closed, s.used >= s.limit
	s.mu.Unlock()
	switch {
	case closed:
		return nil, errors.New("the pipeline closed")
	case full:
		why := fmt.Sprintf("the spill limit (spindle.feed.spillDisk, %d bytes) was taken by other splits", s.limit)
		s.refuse(i, "", 0, why)
		return nil, errors.New(why)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		s.refuse(i, "", 0, err.Error())
		return nil, err
	}
	// A name of its own: the pipelines of one rank (its own, one on a new
	// plan) may spill into the same directory.
	f, err := os.CreateTemp(s.dir, "split-"+strconv.Itoa(i)+"-*.arrow")
	if err != nil {
		s.refuse(i, "", 0, err.Error())
		return nil, err
	}
	path := f.Name()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	if err != nil {
		_ = f.Close()
		s.refuse(i, path, 0, fmt.Sprintf("write %s: %v", path, err))
		return nil, err
	}
	sw := &spillWriter{store: s, split: i, path: path, f: f, w: w,
		queue: make(chan arrow.RecordBatch, spillQueue), done: make(chan struct{})}
	go sw.run()
	return sw, nil
}

// run writes the queued batches until the queue is closed.
func (sw *spillWriter) run() {
	defer close(sw.done)
	for rec := range sw.queue {
		if sw.why == "" {
			if sw.why = sw.append(rec); sw.why != "" {
				sw.failed.Store(true)
			}
		}
		rec.Release()
	}
}

// append writes rec and reserves the room the file grew by, or says why
// it could not.
func (sw *spillWriter) append(rec arrow.RecordBatch) string {
	if err := sw.w.Write(rec); err != nil {
		return fmt.Sprintf("write %s: %v", sw.path, err)
	}
	return sw.reserveGrowth()
}

// reserveGrowth reserves the room the file grew by since the last time,
// or says why the store has none for it.
func (sw *spillWriter) reserveGrowth() string {
	size, err := sw.f.Seek(0, io.SeekCurrent) // the writer only appends
	if err != nil {
		return fmt.Sprintf("write %s: %v", sw.path, err)
	}
	if grew := size - sw.reserved; grew > 0 {
		if !sw.store.reserve(grew) {
			return fmt.Sprintf("it outgrew the room left of the spill limit (spindle.feed.spillDisk, %d bytes)", sw.store.limit)
		}
		sw.reserved += grew
	}
	return ""
}

// write queues rec for the file. It returns false, having aborted the
// writer, once an earlier batch could not be written.
func (sw *spillWriter) write(rec arrow.RecordBatch) bool {
	if sw.failed.Load() {
		sw.abort("")
		return false
	}
	rec.Retain()
	sw.queue <- rec
	return true
}

// finish writes what is queued and the file's footer, and keeps the file
// in the store; false when it could not (the file is gone then).
func (sw *spillWriter) finish() bool {
	close(sw.queue)
	<-sw.done
	if sw.why != "" {
		sw.discard(sw.why)
		return false
	}
	if err := sw.w.Close(); err != nil {
		sw.discard(fmt.Sprintf("write %s: %v", sw.path, err))
		return false
	}
	if why := sw.reserveGrowth(); why != "" {
		sw.discard(why)
		return false
	}
	if err := sw.f.Close(); err != nil {
		sw.store.refuse(sw.split, sw.path, sw.reserved, fmt.Sprintf("write %s: %v", sw.path, err))
		return false
	}
	sw.store.keep(sw.split, sw.path)
	return true
}

// abort stops the writer, removes the file, gives its room back and marks
// the split as not to be spilled again, for why (or for the reason a
// batch could not be written, when why is empty).
func (sw *spillWriter) abort(why string) {
	close(sw.queue)
	<-sw.done
	if sw.why != "" {
		why = sw.why
	}
	sw.discard(why)
}

// discard closes and removes the file, once the goroutine has ended.
func (sw *spillWriter) discard(why string) {
	_ = sw.f.Close()
	sw.store.refuse(sw.split, sw.path, sw.reserved, why)
}

// spilledReader yields a split's batches from its file in the store.
type spilledReader struct {
	f    *os.File
	r    *ipc.FileReader
	next int
}

// openSpilled opens the kept file of split i.
func (s *spillStore) openSpilled(i int, path string) (*spilledReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("feed cache: open split %d's batches spilled to %s: %w", i, path, err)
	}
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(s.alloc))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("feed cache: read split %d's batches spilled to %s: %w", i, path, err)
	}
	return &spilledReader{f: f, r: r}, nil
}

func (r *spilledReader) Schema() *arrow.Schema { return r.r.Schema() }

func (r *spilledReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.next == r.r.NumRecords() {
		return nil, io.EOF
	}
	rec, err := r.r.RecordBatchAt(r.next)
	if err != nil {
		return nil, fmt.Errorf("feed cache: batch %d spilled to %s: %w", r.next, r.f.Name(), err)
	}
	r.next++
	return rec, nil
}

func (r *spilledReader) Close() error {
	err := r.r.Close()
	return errors.Join(err, r.f.Close())
}
