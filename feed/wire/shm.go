package wire

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spindle-ml/spindle/feed"
)

// Shared memory for feed streams.
//
// Over the feed socket, every byte of a batch is copied twice by the
// kernel: into the socket by the executor and out of it by the training
// process. On a machine whose cores also decode, those copies cost as much
// CPU as decoding itself. A client that connects to the socket's
// shared-memory twin (SharedMemoryPath) instead receives a memfd region
// (sent with SCM_RIGHTS) that both processes map; the executor writes each
// message of the stream (an Arrow IPC message, or the tensor header and
// batch frames) into the region and sends only its place over the socket,
// and the client reads it where it lies. The client hands a message's
// space back when it is done with it (Arrow's reference counts in
// DialArrow, the next batch in DialTensor, the garbage collector in
// Python) by writing its offset to the socket.
//
// The socket carries fixed frames of shmFrameBytes from the executor:
//
//	kind  byte: 'R' region (with the memfd; a = its size, b = flags:
//	            regionHolds), 'M' message in the region (a = offset, b =
//	            length), 'I' message inline (a = length; the message's
//	            bytes follow the frame), 'H' the epoch's end is held (a =
//	            its count on the stream), 'E' end of the stream
//	pad   7 bytes
//	a, b  uint64 little-endian
//
// and 8-byte little-endian offsets of freed messages from the client
// (shmAbandon closes an epoch early; shmHello says the client answers 'H'
// frames, shmAtHold answers one). A message that does not fit the
// region (the client holds the rest of it) is sent inline, so a client
// that keeps batches never stalls the stream. docs/feed-protocol.md
// describes it for other clients.
const (
	shmFrameBytes = 24
	shmFreeBytes  = 8

	frameRegion  = 'R'
	frameMessage = 'M'
	frameInline  = 'I'
	frameHold    = 'H'
	frameEnd     = 'E'
)

// Held epoch ends (docs/feed-protocol.md): an executor whose epochs end
// only once every rank trained them (going on in place with input) sends
// 'H' where the epoch's batches run out and waits, before it asks the
// driver whether the epoch ends, for the client to answer it with
// shmAtHold. The client reads 'H' only when its process asks for the
// message after the last batch, so the answer says the process took the
// whole epoch, which the executor cannot see in the region (read-ahead)
// nor in the frees (a Python process frees a batch when it is garbage).
// Only a client that said shmHello, in answer to regionHolds, gets 'H'.
const (
	regionHolds = 1 // the 'R' frame's flag: the executor may hold ends

	shmHello  = ^uint64(1) // the client answers 'H' frames
	shmAtHold = ^uint64(2) // the client's process asked beyond an 'H'
)

// shmRegionBytes is the size of a server's region, which its streams use
// one after the other (its pages, once written, fault no more). Of it, at most
// a quarter holds messages at once: that bounds the batches sent ahead of
// the training process and those it holds, as the socket's buffers do
// without shared memory, and the rest leaves room to place them. The
// region is sparse (only pages written hold memory), the allocator
// reuses the lowest free space first, and each page written the first
// time costs the kernel a fault and a zeroing, so a small working set
// also keeps that cost to the first few batches of an epoch. Messages
// over half the working set go inline.
const shmRegionBytes = 64 << 20

// MaxSharedLendBytes is the most a SharedRegion lends its pipeline
// beyond the message space: room for the batches read ahead
// (PipelineConfig.MemoryBudget) and those the training process holds.
// Batches decoded when the lent space is full live in the executor's heap
// and are copied as before.
const MaxSharedLendBytes = 64 << 20

// shmAlign is the alignment of messages in the region (Arrow buffers want
// 8 bytes; 64 keeps every message on its own cache lines).
const shmAlign = 64

// SharedMemoryPath is the socket of the shared-memory stream beside the
// feed socket at path.
func SharedMemoryPath(path string) string { return path + ".shm" }

// putFrame appends a frame to dst.
func putFrame(dst []byte, kind byte, a, b uint64) []byte {
	var f [shmFrameBytes]byte
	f[0] = kind
	binary.LittleEndian.PutUint64(f[8:], a)
	binary.LittleEndian.PutUint64(f[16:], b)
	return append(dst, f[:]...)
}

// parseFrame reads a frame.
func parseFrame(f []byte) (kind byte, a, b uint64) {
	return f[0], binary.LittleEndian.Uint64(f[8:]), binary.LittleEndian.Uint64(f[16:])
}

// shmRegion is the executor's side of the region: a memfd mapped
// read-write. Its first msgEnd bytes hold messages, placed by a first-fit
// allocator; the rest, when the region was made with a SharedRegion, is
// lent to the pipeline for the batches it decodes (batches), which are
// then sent where they lie.
type shmRegion struct {
	fd     int
	mem    []byte
	msgEnd int64 // messages in [0, msgEnd); lent batches in [msgEnd, len(mem))

	mu     sync.Mutex
	msgs   extents
	charge map[uint64]int64 // message offset -> what it counts against budget
	inUse  int64            // the charges of the messages not yet freed
	budget int64            // most bytes in use at once
	freed  chan struct{}    // signalled (without blocking) on every free
	frees  atomic.Uint64    // messages freed so far

	holdWait time.Duration // shmHoldWait; tests that assert no message went inline stretch it

	lendMu   sync.Mutex
	batches  extents // the lent space; empty without it
	lent     int64   // its bytes lent
	lendShut bool    // the region is unmapped, or about to be: lend no more
}

// newShmRegion creates a region of msgBytes for messages and lendBytes
// for batches.
func newShmRegion(msgBytes, lendBytes int64) (*shmRegion, error) {
	size := msgBytes + lendBytes
	fd, err := unix.MemfdCreate("spindle-feed", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create the shared-memory region: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("size the shared-memory region: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("map the shared-memory region: %w", err)
	}
	return &shmRegion{fd: fd, mem: mem, msgEnd: msgBytes, msgs: newExtents(0, msgBytes), charge: map[uint64]int64{},
		budget: msgBytes / 4, freed: make(chan struct{}, 1), batches: newExtents(msgBytes, lendBytes), holdWait: shmHoldWait}, nil
}

// extents is a first-fit allocator of a range of the region: it takes
// the lowest free space that holds what is asked.
type extents struct {
	free []extent         // sorted by off, merged
	used map[uint64]int64 // offset -> length, until given back
}

type extent struct{ off, n int64 }

func newExtents(off, n int64) extents {
	x := extents{used: map[uint64]int64{}}
	if n > 0 {
		x.free = []extent{{off, n}}
	}
	return x
}

// take takes n bytes (rounded up to shmAlign).
func (x *extents) take(n int64) (uint64, bool) {
	n = (n + shmAlign - 1) &^ (shmAlign - 1)
	for i, e := range x.free {
		if e.n < n {
			continue
		}
		if e.n == n {
			x.free = append(x.free[:i], x.free[i+1:]...)
		} else {
			x.free[i] = extent{e.off + n, e.n - n}
		}
		x.used[uint64(e.off)] = n
		return uint64(e.off), true
	}
	return 0, false
}

// give gives back what take returned at off, and returns its length;
// false when off names nothing taken.
func (x *extents) give(off uint64) (int64, bool) {
	n, ok := x.used[off]
	if !ok {
		return 0, false
	}
	delete(x.used, off)
	e := extent{int64(off), n}
	i := sort.Search(len(x.free), func(i int) bool { return x.free[i].off > e.off })
	x.free = append(x.free, extent{})
	copy(x.free[i+1:], x.free[i:])
	x.free[i] = e
	// Merge with the neighbours.
	if i+1 < len(x.free) && x.free[i].off+x.free[i].n == x.free[i+1].off {
		x.free[i].n += x.free[i+1].n
		x.free = append(x.free[:i+1], x.free[i+2:]...)
	}
	if i > 0 && x.free[i-1].off+x.free[i-1].n == x.free[i].off {
		x.free[i-1].n += x.free[i].n
		x.free = append(x.free[:i], x.free[i+1:]...)
	}
	return n, true
}

// tryAlloc takes n bytes for a message that counts charge bytes against
// the budget (its own size, or, for a batch sent where it lies, the
// batch's).
func (r *shmRegion) tryAlloc(n, charge int64) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inUse+charge > r.budget {
		return 0, false
	}
	off, ok := r.msgs.take(n)
	if ok {
		r.charge[off] = charge
		r.inUse += charge
	}
	return off, ok
}

// lend takes size bytes of the lent space; nil when it has no room, or
// the region is closed.
func (r *shmRegion) lend(size int) []byte {
	if size <= 0 {
		return nil
	}
	r.lendMu.Lock()
	defer r.lendMu.Unlock()
	if r.lendShut {
		return nil
	}
	off, ok := r.batches.take(int64(size))
	if !ok {
		return nil
	}
	r.lent += r.batches.used[off]
	return r.mem[off : off+uint64(size) : off+uint64(size)]
}

// lentOffset returns where b lies in the lent space; false when it lies
// elsewhere.
func (r *shmRegion) lentOffset(b []byte) (uint64, bool) {
	if cap(b) == 0 || len(r.mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base+uintptr(r.msgEnd) || p >= base+uintptr(len(r.mem)) {
		return 0, false
	}
	return uint64(p - base), true
}

// giveBack returns space lend gave out.
func (r *shmRegion) giveBack(b []byte) {
	off, ok := r.lentOffset(b)
	if !ok {
		panic("wire: a buffer given back to the shared region that it did not lend")
	}
	r.lendMu.Lock()
	n, ok := r.batches.give(off)
	r.lent -= n
	r.lendMu.Unlock()
	if !ok {
		panic(fmt.Sprintf("wire: the shared region's offset %d given back twice", off))
	}
}

// lentBytes returns the bytes lent and not given back.
func (r *shmRegion) lentBytes() int64 {
	r.lendMu.Lock()
	defer r.lendMu.Unlock()
	return r.lent
}

// SharedRegion is a feed server's shared memory, made before its
// pipeline so that the pipeline decodes batches into it: it is the
// pipeline's feed.BatchMemory (PipelineConfig.BatchMemory) and the
// server's region (ServerConfig.SharedRegion). An arrow-mode batch whose
// buffers all lie in it goes to the training process without being
// copied: only its metadata is written into the region's message space,
// pointing at the buffers where they lie.
//
// Close it after both the server and the pipeline are closed.
type SharedRegion struct {
	r *shmRegion
}

var _ feed.BatchMemory = (*SharedRegion)(nil)

// NewSharedRegion makes a region that lends lendBytes (at most
// MaxSharedLendBytes; zero or less means that) to its pipeline; it fails
// where memfds are not to be had (the server then sends batches over the
// socket).
func NewSharedRegion(lendBytes int64) (*SharedRegion, error) {
	r, err := newShmRegion(shmRegionBytes, sharedLendBytes(lendBytes))
	if err != nil {
		return nil, err
	}
	return &SharedRegion{r: r}, nil
}

// sharedLendBytes is the lent space of a SharedRegion asked to lend
// lendBytes.
func sharedLendBytes(lendBytes int64) int64 {
	if lendBytes <= 0 || lendBytes > MaxSharedLendBytes {
		return MaxSharedLendBytes
	}
	return lendBytes
}

// SharedResidentBytes is the most an executor's shared-memory feed in the
// given mode, with the given read-ahead budget, adds to the resident
// sizes of the executor and its training process taken together. Both
// processes map the region and each counts the pages it touched, so a
// cluster manager that sums its container's resident sizes (YARN does)
// counts the message space twice; the lent space holds batches the
// executor's budget counts already, and the training process counts it
// again. The figure is a bound: the pages touched are those of the
// messages and batches in flight at once.
func SharedResidentBytes(mode Mode, memoryBudget int64) int64 {
	if !mode.streams() {
		return 0
	}
	n := 2 * int64(shmRegionBytes)
	if mode == ModeArrow {
		n += sharedLendBytes(memoryBudget)
	}
	return n
}

// TryAllocate is part of feed.BatchMemory.
func (s *SharedRegion) TryAllocate(size int) []byte { return s.r.lend(size) }

// Owns is part of feed.BatchMemory.
func (s *SharedRegion) Owns(b []byte) bool {
	_, ok := s.r.lentOffset(b)
	return ok
}

// Free is part of feed.BatchMemory.
func (s *SharedRegion) Free(b []byte) { s.r.giveBack(b) }

// Close unmaps the region. While a batch still holds some of it (a
// pipeline not yet closed), the mapping is left for the process's
// lifetime and Close says so.
// Nothing is lent once it is closed.
func (s *SharedRegion) Close() error {
	r := s.r
	r.lendMu.Lock()
	if r.lent > 0 {
		n := r.lent
		r.lendMu.Unlock()
		return fmt.Errorf("the feed's shared memory still holds %d bytes of batches; left mapped", n)
	}
	shut := r.lendShut
	r.lendShut = true
	r.lendMu.Unlock()
	if shut {
		return nil
	}
	return r.close()
}

// shmHoldWait is how long the client may have read every frame sent
// without freeing anything before a message that does not fit goes
// inline: long enough for a batch being worked on to be released, short
// next to a training step that keeps batches.
const shmHoldWait = 20 * time.Millisecond

// shmHoldChecks is how many times in a row the client must be seen idle
// before a message goes inline, besides shmHoldWait: on a busy machine a
// starved process can see that time pass between two looks, with the
// client's frees unread only because nothing of it ran.
const shmHoldChecks = 10

// tooBig reports whether a message that counts charge bytes against the
// budget goes inline however empty the region: it would crowd out the
// read-ahead.
func (r *shmRegion) tooBig(charge int64) bool { return charge > r.budget/2 }

// alloc takes n bytes, waiting while the client still has messages to
// read that it will free. It gives up (false) when the client has read
// every frame sent (idle says so) and freed nothing for shmHoldWait and
// shmHoldChecks looks: it
// holds the space and may wait for the next message, so waiting on could
// wait forever, and the message goes inline.
//
// stopped ends the wait with its error once the client has stopped the
// stream.
func (r *shmRegion) alloc(ctx context.Context, n, charge int64, idle func() bool, stopped func() error) (uint64, bool, error) {
	var idleSince time.Time
	idleLooks := 0
	for {
		if off, ok := r.tryAlloc(n, charge); ok {
			return off, true, nil
		}
		if err := stopped(); err != nil {
			return 0, false, err
		}
		switch {
		case !idle():
			idleSince, idleLooks = time.Time{}, 0
		case idleSince.IsZero():
			idleSince, idleLooks = time.Now(), 1
		default:
			if idleLooks++; idleLooks >= shmHoldChecks && time.Since(idleSince) >= r.holdWait {
				return 0, false, nil
			}
		}
		select {
		case <-r.freed:
			idleSince, idleLooks = time.Time{}, 0
		case <-time.After(time.Millisecond): // look at idle again
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	}
}

// release gives back the message at off. An offset that names no message
// (a confused or hostile client) is an error, and changes nothing.
func (r *shmRegion) release(off uint64) error {
	r.mu.Lock()
	if _, ok := r.msgs.give(off); !ok {
		r.mu.Unlock()
		return fmt.Errorf("the client freed offset %d, which holds no message", off)
	}
	r.inUse -= r.charge[off]
	delete(r.charge, off)
	r.mu.Unlock()
	r.frees.Add(1)
	select {
	case r.freed <- struct{}{}:
	default:
	}
	return nil
}

// close unmaps the executor's view and closes the memfd. The client's
// mapping, if any, stays valid until the client unmaps it.
func (r *shmRegion) close() error {
	err := unix.Munmap(r.mem)
	if cerr := unix.Close(r.fd); err == nil {
		err = cerr
	}
	return err
}

// shmMapping is the client's side of a region: mapped, and
// unmapped once the epoch is closed and every message read from it has
// been released.
type shmMapping struct {
	mem []byte

	mu     sync.Mutex
	refs   int                // the epoch, plus one per message not yet released
	body   map[uintptr]uint64 // address of a message's body -> the message's offset
	free   func(off uint64)   // tells the executor
	onDone func()             // called once unmapped
	unmap  bool               // done
}

func mapShm(fd int, size int64, free func(uint64), onDone func()) (*shmMapping, error) {
	// Writable: a message's bytes are the client's until it frees them,
	// and tensor batches are plain slices a program may scale in place.
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the feed's shared memory: %w", err)
	}
	return &shmMapping{mem: mem, refs: 1, body: map[uintptr]uint64{}, free: free, onDone: onDone}, nil
}

// unref drops one reference and unmaps the region after the last.
func (m *shmMapping) unrefLocked() {
	m.refs--
	if m.refs == 0 && !m.unmap {
		m.unmap = true
		_ = unix.Munmap(m.mem)
		m.mem = nil
		m.onDone()
	}
}

// close drops the epoch's reference.
func (m *shmMapping) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unrefLocked()
}
