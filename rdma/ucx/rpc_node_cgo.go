//go:build cgo && linux

package ucx

/*
#include <stdlib.h>
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// node is a UCP worker shared by the goroutines of a Listener or a
// Dialer. Every UCP call holds mu; a goroutine waiting for its requests
// polls the worker itself (await), so whoever waits drives the transfer.
type node struct {
	mu           sync.Mutex
	closed       bool
	ctx, w       unsafe.Pointer
	efd          C.int
	addr         []byte
	noPeerErrors bool // set once an endpoint could not have UCX's peer failure reports

	wakeMu  sync.RWMutex
	wake    int // eventfd: cancellations, others' progress, losses
	blocked atomic.Int32

	// Requests a failed call could not end, and the memory they may
	// still touch: destroy ends them before the worker goes.
	orphans    []unsafe.Pointer
	orphanPins []*runtime.Pinner
	orphanBufs []cbuf
}

func newNode() (*node, error) {
	if err := load(); err != nil {
		return nil, err
	}
	n := &node{}
	var err error
	if n.ctx, n.w, n.efd, n.wake, err = startWorker(rndvThresh(true)); err != nil {
		return nil, err
	}
	if n.addr, err = workerAddress(n.w); err != nil {
		n.destroy(nil)
		return nil, err
	}
	return n, nil
}

// connect makes an endpoint to the worker at addr, with UCX's peer
// failure reports where the transports have them.
func (n *node) connect(addr []byte) (*C.spx_ep, error) {
	ep := (*C.spx_ep)(C.calloc(1, C.size_t(unsafe.Sizeof(C.spx_ep{}))))
	caddr := C.CBytes(addr)
	defer C.free(caddr)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		C.free(unsafe.Pointer(ep))
		return nil, errClosed
	}
	st := C.int(statusUnreachable)
	if !n.noPeerErrors {
		st = C.spx_ep_create(n.w, caddr, ep, 1)
	}
	if st == statusUnreachable {
		n.noPeerErrors = true
		st = C.spx_ep_create(n.w, caddr, ep, 0)
	}
	if st != statusOK {
		C.free(unsafe.Pointer(ep))
		return nil, fmt.Errorf("connect a UCP endpoint: %w", statusError(st))
	}
	return ep, nil
}

// closeEp closes ep and waits (bounded) for it; the caller must not hold
// mu. ep's memory is freed.
func (n *node) closeEp(ep *C.spx_ep) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return // destroy freed it
	}
	r := C.spx_ep_close(ep, ep.peer_errors)
	wait := closeWait
	if ep.peer_errors == 0 {
		wait = flushWait
	}
	for end := time.Now().Add(wait); r != nil && time.Now().Before(end); {
		C.spx_progress(n.w)
		if C.spx_request_status(r) != statusInProgress {
			break
		}
		runtime.Gosched()
	}
	if r != nil {
		C.spx_request_free(r)
	}
	C.free(unsafe.Pointer(ep))
}

// progress drives the worker; mu is held. Sleepers are woken when it
// moved something, since it may have been theirs.
func (n *node) progress() bool {
	moved := false
	for i := 0; i < 64 && C.spx_progress(n.w) > 0; i++ {
		moved = true
	}
	if moved && n.blocked.Load() > 0 {
		n.signal()
	}
	return moved
}

func (n *node) signal() {
	n.wakeMu.RLock()
	defer n.wakeMu.RUnlock()
	if n.wake < 0 {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(n.wake, one[:])
}

// idle spins for a little while after the last movement, then sleeps on
// the worker's event descriptor (pauseWorker; mu is held, and released).
func (n *node) idle(moved time.Time) {
	pauseWorker(&n.mu, n.w, &n.blocked, moved, n.sleep)
}

// sleep waits on the worker's event descriptor and the wake eventfd.
func (n *node) sleep() {
	n.wakeMu.RLock()
	defer n.wakeMu.RUnlock()
	if n.wake < 0 {
		return
	}
	fds := []unix.PollFd{{Fd: int32(n.efd), Events: unix.POLLIN}, {Fd: int32(n.wake), Events: unix.POLLIN}}
	if k, _ := unix.Poll(fds, int(maxPollWait/time.Millisecond)); k > 0 && fds[1].Revents&unix.POLLIN != 0 {
		var b [8]byte
		unix.Read(n.wake, b[:])
	}
}

// await polls the worker until step, called with mu held, says the
// operation is done or failed. step reports whether it moved anything.
func (n *node) await(ctx context.Context, step func() (done, moved bool, err error)) error {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, n.signal)
		defer stop()
	}
	for moved := time.Now(); ; {
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return errClosed
		}
		if n.progress() {
			moved = time.Now()
		}
		done, mv, err := step()
		if mv {
			moved = time.Now()
		}
		if err == nil && !done {
			err = ctx.Err()
		}
		if done || err != nil {
			n.mu.Unlock()
			return err
		}
		n.idle(moved)
	}
}

// abandon cancels reqs and waits briefly for them; mu is held. It reports
// whether some could not end: those become orphans, with pin and bufs.
func (n *node) abandon(reqs []unsafe.Pointer, pin *runtime.Pinner, bufs ...cbuf) bool {
	for _, r := range reqs {
		if r != nil {
			C.spx_request_cancel(n.w, r)
		}
	}
	end := time.Now().Add(abandonWait)
	for {
		C.spx_progress(n.w)
		live := 0
		for i, r := range reqs {
			if r == nil {
				continue
			}
			if C.spx_request_status(r) == statusInProgress {
				live++
			} else {
				C.spx_request_free(r)
				reqs[i] = nil
			}
		}
		if live == 0 {
			return false
		}
		if time.Now().After(end) {
			break
		}
		runtime.Gosched()
	}
	for _, r := range reqs {
		if r != nil {
			n.orphans = append(n.orphans, r)
		}
	}
	if pin != nil {
		n.orphanPins = append(n.orphanPins, pin)
	}
	n.orphanBufs = append(n.orphanBufs, bufs...)
	return true
}

// destroy closes eps, ends every request and destroys the worker.
func (n *node) destroy(eps []*C.spx_ep) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	closeWorker(n.ctx, n.w, eps, n.orphans, n.noPeerErrors)
	n.mu.Unlock()
	n.wakeMu.Lock()
	if n.wake >= 0 {
		unix.Close(n.wake)
	}
	n.wake = -1
	n.wakeMu.Unlock()
	for _, ep := range eps {
		C.free(unsafe.Pointer(ep))
	}
	for _, p := range n.orphanPins {
		p.Unpin()
	}
	for _, b := range n.orphanBufs {
		b.free()
	}
}

// cbuf is C memory: UCX may keep its address for as long as it likes,
// and its registration cache keeps a reused buffer registered.
type cbuf struct {
	p   unsafe.Pointer
	cap int
}

func (b cbuf) bytes(n int) []byte { return unsafe.Slice((*byte)(b.p), n) }

func (b cbuf) free() {
	if b.p != nil {
		C.free(b.p)
	}
}

// bufPool keeps freed buffers by size class for reuse.
type bufPool struct {
	mu   sync.Mutex
	free [48][]cbuf
}

const (
	minBufClass = 12 // 4 KiB
	keepPerSize = 16
)

func (p *bufPool) get(n int) cbuf {
	class := max(bits.Len(uint(n-1)), minBufClass)
	p.mu.Lock()
	if k := len(p.free[class]); k > 0 {
		b := p.free[class][k-1]
		p.free[class] = p.free[class][:k-1]
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	return cbuf{p: C.malloc(C.size_t(1) << class), cap: 1 << class}
}

func (p *bufPool) put(b cbuf) {
	if b.p == nil {
		return
	}
	class := bits.Len(uint(b.cap - 1))
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free[class]) < keepPerSize {
		p.free[class] = append(p.free[class], b)
		return
	}
	b.free()
}

func (p *bufPool) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.free {
		for _, b := range p.free[c] {
			b.free()
		}
		p.free[c] = nil
	}
}

// iovs is a C array of message pieces.
type iovs struct{ p *C.spx_iov }

func newIovs() iovs {
	return iovs{(*C.spx_iov)(C.calloc(maxBody+2, C.size_t(unsafe.Sizeof(C.spx_iov{}))))}
}

// set points piece i at n bytes at p. The address is stored as an
// integer: a pointer store into C memory would go through the garbage
// collector's write barrier, which takes the entry's old contents (a Go
// buffer of an earlier call, freed since) for a live pointer.
func (v iovs) set(i int, p unsafe.Pointer, n int) {
	e := (*C.spx_iov)(unsafe.Add(unsafe.Pointer(v.p), uintptr(i)*unsafe.Sizeof(C.spx_iov{})))
	*(*uintptr)(unsafe.Pointer(&e.buf)) = uintptr(p)
	e.len = C.size_t(n)
}

// reqDone checks *r, freeing it once it has ended; mu is held.
func reqDone(r *unsafe.Pointer) (done, moved bool, err error) {
	if *r == nil {
		return true, false, nil
	}
	st := C.spx_request_status(*r)
	if st == statusInProgress {
		return false, false, nil
	}
	C.spx_request_free(*r)
	*r = nil
	if st != statusOK {
		return true, true, statusError(st)
	}
	return true, true, nil
}
