package feed

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// splitCache keeps the decoded batches of whole splits from one epoch to
// the next, so that later epochs neither read nor decode them again. It
// holds at most limit bytes; a split that does not fit in what is left is
// read again every epoch. A split enters the cache only once it has been
// read whole (to its end, or to its last planned row: an epoch that stops
// at a row limit never asks for the end), so the cache serves exactly the
// batches its reader yielded, and an epoch yields the same batches whether
// its splits come from the cache or not.
//
// Sizes count every buffer of a batch in full, also when the batch is a
// slice of a larger one, and the page a buffer slices (flatColumns hands
// out slices of decompressed pages) in full once, so the cache never
// holds more than limit bytes of memory.
type splitCache struct {
	limit int64
	// mem is the consumer's batch memory: a split with a batch there is
	// not kept.
	mem BatchMemory

	mu     sync.Mutex
	used   int64
	splits map[int][]arrow.RecordBatch // by index into PipelineConfig.Splits
	// unfit are the splits that outgrew the room left when recorded: the
	// room only shrinks, so they are not recorded again.
	unfit  map[int]bool
	closed bool

	hits, misses atomic.Int64
}

func newSplitCache(limit int64, mem BatchMemory) *splitCache {
	return &splitCache{limit: limit, mem: mem, splits: map[int][]arrow.RecordBatch{}, unfit: map[int]bool{}}
}

// open returns a reader of split i, which holds rows rows (0 when not
// known): from the cache when it holds the split, otherwise the reader
// that open builds, recording what it yields for the cache while there is
// room for it (open is told whether it will be).
func (c *splitCache) open(i int, rows int64, open func(recorded bool) (Reader, error)) (Reader, error) {
	c.mu.Lock()
	recs, ok := c.splits[i]
	if ok {
		recs = slices.Clone(recs) // the reader's own, one reference each
		for _, r := range recs {
			r.Retain()
		}
	}
	room := c.limit - c.used
	if c.unfit[i] {
		room = 0
	}
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
		return &cachedReader{schema: recs[0].Schema(), recs: recs}, nil
	}
	c.misses.Add(1)
	r, err := open(room > 0)
	if err != nil || room <= 0 {
		return r, err
	}
	return &recordingReader{Reader: r, cache: c, split: i, rows: rows, room: room}, nil
}

// put takes the batches of split i, which were read whole. It keeps
// them when they fit and nobody put the split first, and releases them
// otherwise.
func (c *splitCache) put(i int, recs []arrow.RecordBatch, size int64) {
	c.mu.Lock()
	_, dup := c.splits[i]
	keep := !c.closed && !dup && c.used+size <= c.limit
	if keep {
		c.splits[i] = recs
		c.used += size
	}
	c.mu.Unlock()
	if !keep {
		releaseAll(recs)
	}
}

// stats returns the splits and bytes held.
func (c *splitCache) stats() (splits int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.splits), c.used
}

// close releases every batch held; later puts release theirs at once.
// Batches handed out stay valid.
func (c *splitCache) close() {
	c.mu.Lock()
	splits := c.splits
	c.splits, c.used, c.closed = map[int][]arrow.RecordBatch{}, 0, true
	c.mu.Unlock()
	for _, recs := range splits {
		releaseAll(recs)
	}
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// heldBytes is the memory rec keeps alive: every buffer of every column,
// counted in full, and for a buffer that slices another
// (memory.SliceBuffer) that one, in full, unless parents says it was
// counted already; parents notes those counted.
func heldBytes(rec arrow.RecordBatch, parents map[*memory.Buffer]bool) int64 {
	var n int64
	for _, col := range rec.Columns() {
		n += dataBytes(col.Data(), parents)
	}
	return n
}

// cachedReader yields a cached split's batches; each Next hands the
// caller a reference of its own.
type cachedReader struct {
	schema *arrow.Schema
	recs   []arrow.RecordBatch // one reference each, owned by the reader
	next   int
}

func (r *cachedReader) Schema() *arrow.Schema { return r.schema }

func (r *cachedReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.next == len(r.recs) {
		return nil, io.EOF
	}
	rec := r.recs[r.next]
	r.recs[r.next] = nil // the caller's now
	r.next++
	return rec, nil
}

func (r *cachedReader) Close() error {
	releaseAll(r.recs[r.next:])
	r.recs, r.next = nil, 0
	return nil
}

// recordingReader passes a split reader's batches on and keeps a
// reference to each for the cache. It gives up recording as soon as the
// split outgrows room, and hands the batches to the cache once it has
// seen the split's last planned row or its end.
type recordingReader struct {
	Reader
	cache *splitCache
	split int
	rows  int64 // the split's planned rows; 0 when not known
	room  int64

	recs    []arrow.RecordBatch
	size    int64
	seen    int64 // rows recorded
	stopped bool  // outgrew room, or handed over
	// parents are the buffers the recorded batches' buffers slice,
	// counted in size already (heldBytes).
	parents map[*memory.Buffer]bool
}

func (r *recordingReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	rec, err := r.Reader.Next(ctx)
	if r.stopped {
		return rec, err
	}
	switch {
	case errors.Is(err, io.EOF):
		r.handOver()
	case err != nil:
		r.drop()
	default:
		if r.parents == nil {
			r.parents = map[*memory.Buffer]bool{}
		}
		r.size += heldBytes(rec, r.parents)
		if r.size > r.room {
			r.drop()
			r.cache.mu.Lock()
			r.cache.unfit[r.split] = true
			r.cache.mu.Unlock()
			break
		}
		if r.cache.mem != nil && dataInMemory(rec, r.cache.mem) {
			// The consumer may write into what it was given in batch
			// memory: the cache must not hand it out again. (Splits it
			// records are decoded into the pipeline's memory.)
			r.drop()
			break
		}
		rec.Retain()
		r.recs = append(r.recs, rec)
		if r.seen += rec.NumRows(); r.rows > 0 && r.seen >= r.rows {
			r.handOver()
		}
	}
	return rec, err
}

// handOver gives the recorded batches, a whole split, to the cache.
func (r *recordingReader) handOver() {
	r.stopped = true
	if len(r.recs) > 0 {
		r.cache.put(r.split, r.recs, r.size)
	}
	r.recs = nil
}

// drop stops recording and releases what was recorded.
func (r *recordingReader) drop() {
	r.stopped = true
	releaseAll(r.recs)
	r.recs = nil
}

func (r *recordingReader) Close() error {
	if !r.stopped {
		r.drop()
	}
	return r.Reader.Close()
}
