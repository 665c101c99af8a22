package feed

import (
	"github.com/apache/arrow-go/v18/arrow"
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

// NewBatchAllocator returns the allocator of batches bound for mem: from
// mem while it has room, else from alloc (alloc itself when mem is nil).
// A pipeline allocates the batches it yields with it; an EpochSource of
// the feed server other than a pipeline can build its batches with it too,
// for the server to send them where they lie.
func NewBatchAllocator(mem BatchMemory, alloc memory.Allocator) memory.Allocator {
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

// dataInMemory reports whether a buffer of rec (or of its columns'
// children and dictionaries) lies in mem.
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
