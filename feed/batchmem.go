package feed

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BatchMemory is memory a pipeline's consumer would rather find its
// batches in: the feed's shared-memory region, from which a batch whose
// every buffer lies there is sent without being copied. The pipeline
// allocates the buffers of the batches it yields from it while it has
// room, and from its own allocator otherwise. Buffers that stay inside
// the pipeline (Parquet pages, shuffle windows, the epoch cache) never
// come from it.
type BatchMemory interface {
	// TryAllocate returns size bytes, 64-byte aligned, with unspecified
	// contents; nil when it has no room. It is called concurrently.
	TryAllocate(size int) []byte
	// Owns reports whether b lies in the memory.
	Owns(b []byte) bool
	// Free gives back b, which TryAllocate returned.
	Free(b []byte)
}

// batchAllocator is the memory.Allocator of the batches a pipeline
// yields: from mem while it has room, else from under.
type batchAllocator struct {
	mem   BatchMemory
	under memory.Allocator
}

var _ memory.Allocator = batchAllocator{}

// batchAlloc returns the allocator for yielded batches: alloc itself
// without batch memory.
func batchAlloc(mem BatchMemory, alloc memory.Allocator) memory.Allocator {
	if mem == nil {
		return alloc
	}
	return batchAllocator{mem: mem, under: alloc}
}

func (a batchAllocator) Allocate(size int) []byte {
	if b := a.mem.TryAllocate(size); b != nil {
		return b
	}
	return a.under.Allocate(size)
}

func (a batchAllocator) Reallocate(size int, b []byte) []byte {
	if !a.mem.Owns(b) {
		return a.under.Reallocate(size, b)
	}
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.mem.Free(b)
	return nb
}

func (a batchAllocator) Free(b []byte) {
	if a.mem.Owns(b) {
		a.mem.Free(b)
		return
	}
	a.under.Free(b)
}

// detachBatch returns rec, or, when a buffer of rec lies in mem, a copy
// of rec whose buffers that did are allocated from alloc: what the
// epoch cache keeps. A batch in shared memory is the consumer's to write
// once sent (tensor programs scale batches in place), so the cache must
// not hand the same bytes out again next epoch. The caller releases the
// result.
func detachBatch(rec arrow.RecordBatch, mem BatchMemory, alloc memory.Allocator) arrow.RecordBatch {
	if mem == nil || !dataInMemory(rec, mem) {
		rec.Retain()
		return rec
	}
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		d := detachData(c.Data(), mem, alloc)
		cols[i] = array.MakeFromData(d)
		d.Release()
	}
	out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

func dataInMemory(rec arrow.RecordBatch, mem BatchMemory) bool {
	var in func(d arrow.ArrayData) bool
	in = func(d arrow.ArrayData) bool {
		for _, b := range d.Buffers() {
			if b != nil && b.Len() > 0 && mem.Owns(b.Bytes()) {
				return true
			}
		}
		for _, c := range d.Children() {
			if in(c) {
				return true
			}
		}
		return d.DataType().ID() == arrow.DICTIONARY && in(d.Dictionary())
	}
	for _, c := range rec.Columns() {
		if in(c.Data()) {
			return true
		}
	}
	return false
}

// detachData copies the buffers of d that lie in mem (its children's and
// dictionary's too) into alloc's memory.
func detachData(d arrow.ArrayData, mem BatchMemory, alloc memory.Allocator) arrow.ArrayData {
	bufs := make([]*memory.Buffer, len(d.Buffers()))
	for i, b := range d.Buffers() {
		if b != nil && b.Len() > 0 && mem.Owns(b.Bytes()) {
			nb := memory.NewResizableBuffer(alloc)
			nb.Resize(b.Len())
			copy(nb.Bytes(), b.Bytes())
			bufs[i] = nb
			continue
		}
		if b != nil {
			b.Retain()
		}
		bufs[i] = b
	}
	children := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		children[i] = detachData(c, mem, alloc)
	}
	out := array.NewData(d.DataType(), d.Len(), bufs, children, d.NullN(), d.Offset())
	if d.DataType().ID() == arrow.DICTIONARY {
		dd := detachData(d.Dictionary(), mem, alloc)
		out.SetDictionary(dd)
		dd.Release()
	}
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	for _, c := range children {
		c.Release()
	}
	return out
}
