package feed

import (
	"context"
	"errors"
	"fmt"
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
// slice of a larger one, and the page a buffer slices (feedpq.FlatColumns hands
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

	// spill keeps on disk the splits that may go there (Flight splits)
	// and do not fit in limit; nil without.
	spill *spillStore

	hits, misses atomic.Int64
}

func newSplitCache(limit int64, mem BatchMemory, spill *spillStore) *splitCache {
	return &splitCache{limit: limit, mem: mem, spill: spill, splits: map[int][]arrow.RecordBatch{}, unfit: map[int]bool{}}
}

// open returns a reader of split i, which holds rows rows (0 when not
// known): from the cache, in memory or, for a spillable split, on disk,
// when it holds the split; otherwise the reader that open builds,
// recording what it yields for the cache while there is room for it
// (open is told whether it will be).
func (c *splitCache) open(i int, rows int64, spillable bool, open func(recorded bool) (Reader, error)) (Reader, error) {
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
	var spill *spillStore
	if spillable {
		if path := c.spill.file(i); path != "" {
			c.hits.Add(1)
			return c.spill.openSpilled(i, path)
		}
		if c.spill.canTake(i) {
			spill = c.spill
		}
	}
	c.misses.Add(1)
	record := room > 0 || spill != nil
	r, err := open(record)
	if err != nil {
		if why := c.spill.whyNot(i); spillable && why != "" {
			err = fmt.Errorf("%w (the executor could not keep the split's batches: they outgrew the cache, spindle.feed.cacheMemory, and on disk %s)", err, why)
		}
		return nil, err
	}
	if !record {
		return r, nil
	}
	return &recordingReader{Reader: r, cache: c, split: i, rows: rows, room: room, spill: spill}, nil
}

// put takes the batches of split i, which were read whole, when they fit
// and nobody put the split first; otherwise they stay the caller's.
func (c *splitCache) put(i int, recs []arrow.RecordBatch, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, dup := c.splits[i]
	if c.closed || dup || c.used+size > c.limit {
		return false
	}
	c.splits[i] = recs
	c.used += size
	return true
}

// stats returns the splits and bytes held.
func (c *splitCache) stats() (splits int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.splits), c.used
}

// close releases every batch held and removes the spilled files; later
// puts release theirs at once. Batches handed out stay valid.
func (c *splitCache) close() error {
	c.mu.Lock()
	splits := c.splits
	c.splits, c.used, c.closed = map[int][]arrow.RecordBatch{}, 0, true
	c.mu.Unlock()
	for _, recs := range splits {
		releaseAll(recs)
	}
	return c.spill.close()
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
// reference to each for the cache. As soon as the split outgrows room it
// moves what it recorded to a spill file, when it may (spill), and goes
// on there, or gives up recording; it hands the batches (or the file) to
// the cache once it has seen the split's last planned row or its end.
type recordingReader struct {
	Reader
	cache *splitCache
	split int
	rows  int64 // the split's planned rows; 0 when not known
	room  int64
	spill *spillStore  // nil: the split stays off disk
	sw    *spillWriter // the split's file, once recording went to disk

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
		if !r.record(rec) {
			r.drop()
			break
		}
		if r.seen += rec.NumRows(); r.rows > 0 && r.seen >= r.rows {
			r.handOver()
		}
	}
	return rec, err
}

// record keeps rec: in memory while the split fits in room, on disk after
// that when it may go there. It returns false when the split is not
// recorded after all.
func (r *recordingReader) record(rec arrow.RecordBatch) bool {
	if r.sw != nil {
		if !r.sw.write(rec) {
			r.sw = nil // it gave up
			return false
		}
		return true
	}
	if r.parents == nil {
		r.parents = map[*memory.Buffer]bool{}
	}
	r.size += heldBytes(rec, r.parents)
	if r.size > r.room {
		r.cache.mu.Lock()
		r.cache.unfit[r.split] = true
		r.cache.mu.Unlock()
		return r.spill != nil && r.toDisk(rec)
	}
	if r.cache.mem != nil && dataInMemory(rec, r.cache.mem) {
		// The consumer may write into what it was given in batch
		// memory: the cache must not hand it out again. (Splits it
		// records are decoded into the pipeline's memory.)
		return false
	}
	rec.Retain()
	r.recs = append(r.recs, rec)
	return true
}

// toDisk moves the recording to a spill file: the batches recorded so
// far, then rec (if any).
func (r *recordingReader) toDisk(rec arrow.RecordBatch) bool {
	all := slices.Clone(r.recs)
	if rec != nil {
		all = append(all, rec)
	}
	sw, err := r.spill.newSpillWriter(r.split, all[0].Schema())
	if err != nil {
		return false
	}
	for _, b := range all {
		if !sw.write(b) {
			return false
		}
	}
	releaseAll(r.recs)
	r.recs, r.sw = nil, sw
	return true
}

// handOver gives the recorded batches, a whole split, to the cache, or
// completes its spill file. Batches the memory cache has no room for
// after all (another split took it meanwhile) go to disk when they may.
func (r *recordingReader) handOver() {
	r.stopped = true
	if len(r.recs) > 0 && !r.cache.put(r.split, r.recs, r.size) {
		if r.spill != nil && r.sw == nil && r.spill.canTake(r.split) {
			r.toDisk(nil)
		}
		releaseAll(r.recs)
	}
	if r.sw != nil {
		r.sw.finish()
		r.sw = nil
	}
	r.recs = nil
}

// drop stops recording and releases what was recorded (or removes its
// spill file).
func (r *recordingReader) drop() {
	r.stopped = true
	if r.sw != nil {
		r.sw.abort("the split was not read to its end")
		r.sw = nil
	}
	releaseAll(r.recs)
	r.recs = nil
}

func (r *recordingReader) Close() error {
	if !r.stopped {
		r.drop()
	}
	return r.Reader.Close()
}
