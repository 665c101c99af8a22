package wire

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is the memory.Allocator behind an arrow-mode client. Each
// record batch of the stream is read into one message body; when the
// caller releases the batch, its body comes back here and the next
// message is read into it. That spares the Go allocator zeroing every
// byte before the socket overwrites it, the page faults of fresh memory
// and the garbage collector's work, which together cost more than the
// read itself. Only the IPC reader allocates from it, and it overwrites
// every byte it asks for.
type recycler struct {
	mu   sync.Mutex
	free [][]byte
}

// maxRecycled bounds the bodies kept for reuse: enough for a consumer
// that holds a few batches at a time.
const maxRecycled = 8

var _ memory.Allocator = (*recycler)(nil)

// Allocate returns a 64-byte aligned slice of size bytes whose contents
// are unspecified.
func (r *recycler) Allocate(size int) []byte {
	r.mu.Lock()
	best := -1
	for i, b := range r.free {
		// Take the smallest buffer that fits, but not one so large that
		// a small request would pin it.
		if c := cap(b); c >= size && c <= 2*size+4096 && (best < 0 || c < cap(r.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := r.free[best]
		last := len(r.free) - 1
		r.free[best] = r.free[last]
		r.free[last] = nil
		r.free = r.free[:last]
		r.mu.Unlock()
		return b[:size]
	}
	r.mu.Unlock()
	return memory.DefaultAllocator.Allocate(size)
}

// Reallocate grows or shrinks b to size bytes, keeping its contents.
func (r *recycler) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

// Free keeps b for reuse, or drops it for the garbage collector when
// enough buffers are kept already (the smallest one goes).
func (r *recycler) Free(b []byte) {
	if cap(b) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.free) < maxRecycled {
		r.free = append(r.free, b[:0])
		return
	}
	small := 0
	for i := range r.free {
		if cap(r.free[i]) < cap(r.free[small]) {
			small = i
		}
	}
	if cap(b) > cap(r.free[small]) {
		r.free[small] = b[:0]
	}
}
