package feed

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// bufferPool is the memory.Allocator of a pipeline: it keeps the buffers
// that arrow-go frees (decompressed pages, batches the consumer has
// released) and hands them out again. Decoding Parquet allocates a fresh
// buffer for every page and every batch; from the Go allocator each one
// is zeroed before the decoder overwrites it, and each one is garbage to
// collect afterwards, which together cost more than the decoding. Reused
// buffers are neither zeroed nor collected, and they are warm in the
// cache.
//
// Buffers are kept in size classes (four per power of two, so a buffer
// wastes at most a quarter of its size) up to a limit of bytes; beyond
// it, freed buffers go back to the underlying allocator. Memory handed
// out has unspecified contents, as from arrow-go's C allocator: arrow-go
// initialises what it reads (the tests run with every buffer poisoned to
// prove it), except pqarrow's list offsets, which files with nested
// columns get zeroed (zeroedAllocator).
type bufferPool struct {
	under memory.Allocator
	limit int64 // bytes of free buffers kept at most

	mu     sync.Mutex
	free   map[int][][]byte // by class size; each slice has len == cap == class size
	held   int64            // bytes in free
	closed bool

	// poison fills every buffer handed out with garbage; tests set it
	// before the pool is used.
	poison bool

	reused, fresh atomic.Int64 // pooled allocations served from free, and not
}

// Buffers outside [minPooled, maxPooled] bytes bypass the pool: small ones
// are cheap to allocate, huge ones rare.
const (
	minPooled = 4 << 10
	maxPooled = 256 << 20
)

// defaultPoolBytes bounds the free buffers a pipeline keeps, unless its
// memory budget is smaller.
const defaultPoolBytes = 64 << 20

var _ memory.Allocator = (*bufferPool)(nil)

func newBufferPool(under memory.Allocator, limit int64) *bufferPool {
	return &bufferPool{under: under, limit: limit, free: map[int][][]byte{}}
}

// classSize returns the size of the class a buffer of size bytes comes
// from: size rounded up to a quarter of a power of two.
func classSize(size int) int {
	k := bits.Len(uint(size - 1)) // 1<<k >= size
	if k < 3 {
		return size
	}
	base := 1 << (k - 1)
	step := base >> 2
	return base + (size-base+step-1)/step*step
}

// pooled reports whether a buffer of capacity c belongs to a size class.
// Every buffer the pool hands out has either a class size as capacity or,
// bypassing the pool, a capacity outside the pooled range.
func pooled(c int) bool { return c >= minPooled && c <= maxPooled && classSize(c) == c }

// Allocate returns a 64-byte aligned slice of size bytes whose contents
// are unspecified.
func (p *bufferPool) Allocate(size int) []byte {
	if size < minPooled || size > maxPooled {
		b := p.under.Allocate(size)
		return b[:size:size]
	}
	c := classSize(size)
	p.mu.Lock()
	if list := p.free[c]; len(list) > 0 {
		b := list[len(list)-1]
		list[len(list)-1] = nil
		p.free[c] = list[:len(list)-1]
		p.held -= int64(c)
		p.mu.Unlock()
		p.reused.Add(1)
		p.poisonBytes(b)
		return b[:size]
	}
	p.mu.Unlock()
	p.fresh.Add(1)
	b := p.under.Allocate(c)[:c:c]
	p.poisonBytes(b)
	return b[:size]
}

// Reallocate returns a slice of size bytes that starts with b's contents,
// and frees b when that needs a new buffer.
func (p *bufferPool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free keeps b for reuse, or gives it back to the underlying allocator
// when the pool is full or closed.
func (p *bufferPool) Free(b []byte) {
	c := cap(b)
	if c == 0 {
		return
	}
	b = b[:c]
	if !pooled(c) {
		p.under.Free(b)
		return
	}
	p.mu.Lock()
	if p.closed || p.held+int64(c) > p.limit {
		p.mu.Unlock()
		p.under.Free(b)
		return
	}
	p.free[c] = append(p.free[c], b)
	p.held += int64(c)
	p.mu.Unlock()
}

// close gives every kept buffer back to the underlying allocator; buffers
// freed afterwards go there directly.
func (p *bufferPool) close() {
	p.mu.Lock()
	free := p.free
	p.free, p.held, p.closed = map[int][][]byte{}, 0, true
	p.mu.Unlock()
	for _, list := range free {
		for _, b := range list {
			p.under.Free(b)
		}
	}
}

func (p *bufferPool) poisonBytes(b []byte) {
	if p.poison {
		for i := range b {
			b[i] = 0xa5
		}
	}
}

// zeroedAllocator hands out zeroed memory from another allocator. pqarrow
// reads nested columns assuming that a new buffer is zeroed: a list
// column's first offset is never written when a batch reaches the end of
// a row group, and whatever the buffer held becomes the base of every
// offset. Buffers from a bufferPool are not zeroed, so Parquet files with
// nested columns get their pqarrow buffers through this.
type zeroedAllocator struct {
	memory.Allocator
}

func (z zeroedAllocator) Allocate(size int) []byte {
	b := z.Allocator.Allocate(size)
	clear(b)
	return b
}

func (z zeroedAllocator) Reallocate(size int, b []byte) []byte {
	old := len(b)
	nb := z.Allocator.Reallocate(size, b)
	if len(nb) > old {
		clear(nb[old:])
	}
	return nb
}
