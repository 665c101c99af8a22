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
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"log/slog"
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

// Listener serves requests over UCX on a worker of its own. Sessions are
// accepted by the caller (Accept) after it authenticated the peer on its
// own channel; a request whose envelope names no accepted session, or the
// wrong key, is dropped unanswered and counted (Refused).
type Listener struct {
	n      *node
	log    *slog.Logger
	handle func(*Request)
	pool   bufPool

	mu       sync.Mutex
	sessions map[uint64]*Session
	reqs     []*Request // free Request values

	refused  atomic.Uint64
	served   atomic.Uint64
	stop     chan struct{}
	loopDone chan struct{}
	handlers sync.WaitGroup
	once     sync.Once
}

// Listen starts a UCP worker and serves its requests with handle, each in
// a goroutine of its own; handle must call the request's Reply exactly
// once. UCX reads UCX_TLS, UCX_NET_DEVICES and its other variables now.
func Listen(log *slog.Logger, handle func(*Request)) (*Listener, error) {
	n, err := newNode()
	if err != nil {
		return nil, err
	}
	l := &Listener{n: n, log: log, handle: handle, sessions: map[uint64]*Session{},
		stop: make(chan struct{}), loopDone: make(chan struct{})}
	go l.loop()
	return l, nil
}

// Address is the worker's address, for the callers' Dialers.
func (l *Listener) Address() []byte { return l.n.addr }

// Refused is the number of requests dropped for a bad envelope.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Served is the number of requests handed to the handler.
func (l *Listener) Served() uint64 { return l.served.Load() }

// Session is one caller's session; its replies go to the endpoint made
// from the address it was accepted with.
type Session struct {
	l      *Listener
	grant  Grant
	ep     *C.spx_ep
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// Accept opens a session for the caller whose worker is at peer. The
// grant goes back to the caller over the channel that authenticated it.
func (l *Listener) Accept(peer []byte) (*Session, error) {
	g, err := newGrant()
	if err != nil {
		return nil, err
	}
	ep, err := l.n.connect(peer)
	if err != nil {
		return nil, err
	}
	s := &Session{l: l, grant: g, ep: ep}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	l.mu.Lock()
	l.sessions[g.ID] = s
	l.mu.Unlock()
	return s, nil
}

// Grant is what the caller needs to be served on s.
func (s *Session) Grant() Grant { return s.grant }

// Context ends when s closes: handlers of its requests stop waiting.
func (s *Session) Context() context.Context { return s.ctx }

// Close ends s: its requests are no longer taken, its replies fail.
func (s *Session) Close() {
	s.once.Do(func() {
		s.cancel()
		s.l.mu.Lock()
		delete(s.l.sessions, s.grant.ID)
		s.l.mu.Unlock()
		s.l.n.closeEp(s.ep)
	})
}

// Request is one request being served. Head and Body are views of the
// received message, valid until Reply returns.
type Request struct {
	l       *Listener
	Session *Session
	Head    []byte
	Body    []byte

	id      uint64
	headLen int
	msg     []byte
	in, out cbuf // the message; the reply's payload
	rhead   cbuf // the reply's head
	iov     iovs
	req     unsafe.Pointer
	pin     runtime.Pinner
}

func (l *Listener) request() *Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := len(l.reqs); k > 0 {
		r := l.reqs[k-1]
		l.reqs = l.reqs[:k-1]
		return r
	}
	return &Request{l: l, iov: newIovs()}
}

// release gives r's buffers back; r must have no request in flight.
func (l *Listener) release(r *Request) {
	l.pool.put(r.in)
	l.pool.put(r.out)
	r.in, r.out = cbuf{}, cbuf{}
	r.Session, r.Head, r.Body, r.msg = nil, nil, nil, nil
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

// Buffer returns n bytes of registered memory for the reply's payload,
// valid until Reply returns (one per request; aligned for any view).
func (r *Request) Buffer(n int) []byte {
	if r.out.cap < n {
		r.l.pool.put(r.out)
		r.out = r.l.pool.get(n)
	}
	return r.out.bytes(n)
}

// Reply sends head and payload (from Buffer, or any memory) back to the
// caller and waits until UCX is done with them. r must not be used after.
func (r *Request) Reply(head, payload []byte) error {
	defer r.l.handlers.Done()
	defer r.l.release(r)
	if len(head) > MaxHeadBytes {
		return fmt.Errorf("ucx: reply head of %d bytes", len(head))
	}
	hp := pad8(len(head))
	if r.rhead.cap < hp {
		r.rhead.free()
		r.rhead = cbuf{p: C.malloc(C.size_t(max(hp, 256))), cap: max(hp, 256)}
	}
	copy(r.rhead.bytes(len(head)), head)
	r.iov.set(0, r.rhead.p, hp)
	k := 1
	if len(payload) > 0 {
		r.pin.Pin(unsafe.SliceData(payload))
		defer r.pin.Unpin()
		r.iov.set(1, unsafe.Pointer(unsafe.SliceData(payload)), len(payload))
		k = 2
	}
	s := r.Session
	n := r.l.n
	n.mu.Lock()
	if n.closed || s.ctx.Err() != nil {
		n.mu.Unlock()
		return ErrLost
	}
	var st C.int
	r.req = C.spx_send_iov(s.ep, r.iov.p, C.size_t(k), C.uint64_t(rpcTag(kindReply, len(head), r.id)), &st)
	n.mu.Unlock()
	if r.req == nil && st != statusOK {
		return statusError(st)
	}
	err := n.await(s.ctx, func() (bool, bool, error) {
		if s.ctx.Err() != nil { // closed: its endpoint may be gone
			return false, false, ErrLost
		}
		if s.ep.failed != 0 {
			return false, false, fmt.Errorf("%w: %w", ErrLost, statusError(C.int(s.ep.status)))
		}
		return reqDone(&r.req)
	})
	if err != nil && r.req != nil {
		n.mu.Lock()
		if !n.closed && n.abandon([]unsafe.Pointer{r.req}, nil, r.rhead, r.out) {
			// UCX may still read them: they are the orphans' now.
			r.rhead, r.out = cbuf{}, cbuf{}
		}
		n.mu.Unlock()
		r.req = nil
	}
	return err
}

// loop takes requests off the worker and hands them to the handler.
func (l *Listener) loop() {
	defer close(l.loopDone)
	n := l.n
	var receiving []*Request
	var ready []*Request
	moved := time.Now()
	for {
		select {
		case <-l.stop:
			n.mu.Lock()
			for _, r := range receiving {
				if !n.closed && n.abandon([]unsafe.Pointer{r.req}, nil, r.in) {
					r.in = cbuf{}
				}
				r.req = nil
			}
			n.mu.Unlock()
			return
		default:
		}
		n.mu.Lock()
		if n.progress() {
			moved = time.Now()
		}
		for {
			var mlen C.size_t
			var full C.uint64_t
			msg := C.spx_probe_mask(n.w, C.uint64_t(rpcTag(kindRequest, 0, 0)), C.uint64_t(0xf<<tagKindShift), &mlen, &full)
			if msg == nil {
				break
			}
			moved = time.Now()
			r := l.request()
			r.id = uint64(full) & tagIDMask
			r.headLen = int(uint64(full)>>tagHeadShift) & tagHeadMask
			size := int(mlen)
			r.in = l.pool.get(max(size, 1))
			r.msg = r.in.bytes(size)
			r.iov.set(0, r.in.p, size)
			var st C.int
			r.req = C.spx_msg_recv_iov(n.w, r.iov.p, 1, msg, &st)
			if r.req == nil && st != statusOK {
				l.log.Warn("ucx request not received", "err", statusError(st))
				l.release(r)
				continue
			}
			receiving = append(receiving, r)
		}
		kept := receiving[:0]
		for _, r := range receiving {
			done, _, err := reqDone(&r.req)
			switch {
			case !done:
				kept = append(kept, r)
			case err != nil:
				moved = time.Now()
				l.log.Warn("ucx request lost while received", "err", err)
				l.release(r)
			default:
				moved = time.Now()
				ready = append(ready, r)
			}
		}
		receiving = kept
		if len(ready) > 0 {
			n.mu.Unlock()
			for _, r := range ready {
				l.dispatch(r)
			}
			ready = ready[:0]
			continue
		}
		n.idle(moved)
	}
}

// dispatch checks a received request's envelope and serves it.
func (l *Listener) dispatch(r *Request) {
	msg, headLen := r.msg, r.headLen
	ok := len(msg) >= envelopeBytes+pad8(headLen)
	var s *Session
	if ok {
		id := binary.LittleEndian.Uint64(msg)
		l.mu.Lock()
		s = l.sessions[id]
		l.mu.Unlock()
		ok = s != nil && subtle.ConstantTimeCompare(msg[8:24], s.grant.Key[:]) == 1
	}
	if !ok {
		if k := l.refused.Add(1); k == 1 || k%1024 == 0 {
			l.log.Warn("ucx request refused: no session of that id and key (a caller that did not authenticate)", "refused", k)
		}
		l.release(r)
		return
	}
	r.Session = s
	r.Head = msg[envelopeBytes : envelopeBytes+headLen]
	r.Body = msg[envelopeBytes+pad8(headLen):]
	l.served.Add(1)
	l.handlers.Add(1)
	go l.handle(r)
}

// Close stops taking requests, closes every session once the handlers
// have replied (their replies fail), and destroys the worker.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.stop)
		l.n.signal()
		<-l.loopDone
		l.mu.Lock()
		sessions := make([]*Session, 0, len(l.sessions))
		for _, s := range l.sessions {
			sessions = append(sessions, s)
		}
		l.mu.Unlock()
		for _, s := range sessions {
			s.cancel()
		}
		l.handlers.Wait()
		for _, s := range sessions {
			s.Close()
		}
		l.n.destroy(nil)
		l.pool.drain()
		l.mu.Lock()
		for _, r := range l.reqs {
			C.free(unsafe.Pointer(r.iov.p))
			r.rhead.free()
		}
		l.reqs = nil
		l.mu.Unlock()
	})
	return nil
}

// Dialer is a caller's UCP worker, shared by its Conns to any number of
// Listeners.
type Dialer struct {
	n      *node
	nextID atomic.Uint64

	mu    sync.Mutex
	slots []*slot
	conns map[*Conn]struct{}
	once  sync.Once
}

// NewDialer starts a caller's UCP worker.
func NewDialer() (*Dialer, error) {
	n, err := newNode()
	if err != nil {
		return nil, err
	}
	return &Dialer{n: n, conns: map[*Conn]struct{}{}}, nil
}

// Address is the worker's address: the Listener accepts a session for it.
func (d *Dialer) Address() []byte { return d.n.addr }

// Conn is a session with one Listener.
type Conn struct {
	d     *Dialer
	ep    *C.spx_ep
	grant Grant
	lost  atomic.Pointer[error]
	once  sync.Once
	// gone is set, under the worker lock, before the endpoint closes.
	gone bool
}

// Connect opens the session g at the Listener whose address is addr.
func (d *Dialer) Connect(addr []byte, g Grant) (*Conn, error) {
	ep, err := d.n.connect(addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{d: d, ep: ep, grant: g}
	d.mu.Lock()
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	return c, nil
}

// Lose marks the session lost (the caller's control channel saw the
// server go): calls waiting on it fail at once, wrapping ErrLost.
func (c *Conn) Lose(err error) {
	e := fmt.Errorf("%w: %w", ErrLost, err)
	c.lost.CompareAndSwap(nil, &e)
	c.d.n.signal()
}

// Close ends the session on this side.
func (c *Conn) Close() {
	c.once.Do(func() {
		c.Lose(errClosed)
		c.d.mu.Lock()
		_, open := c.d.conns[c]
		delete(c.d.conns, c)
		c.d.mu.Unlock()
		if open {
			c.d.n.mu.Lock()
			c.gone = true
			c.d.n.mu.Unlock()
			c.d.n.closeEp(c.ep)
		}
	})
}

// slot is the memory of one call: reused call after call.
type slot struct {
	head    cbuf // envelope and head
	rhead   cbuf // the reply's head, when its payload goes in place
	scratch cbuf // the whole reply otherwise
	iov     iovs
	riov    iovs
	pin     runtime.Pinner
	pinned  bool
}

func (d *Dialer) slot() *slot {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k := len(d.slots); k > 0 {
		s := d.slots[k-1]
		d.slots = d.slots[:k-1]
		return s
	}
	return &slot{iov: newIovs(), riov: newIovs()}
}

func grow(b *cbuf, n int) {
	if b.cap < n {
		b.free()
		c := max(n, 512)
		*b = cbuf{p: C.malloc(C.size_t(c)), cap: c}
	}
}

// Reply is the answer to a call: views valid until Release.
type Reply struct {
	// Head is the reply's head.
	Head []byte
	// Payload is the reply's payload: the call's into when it was
	// received there, else a view of the call's memory.
	Payload []byte
	// InPlace says the payload was received into the call's into.
	InPlace bool
	d       *Dialer
	s       *slot
}

// Release gives the reply's memory back for the next call.
func (r Reply) Release() {
	if r.s != nil {
		r.d.mu.Lock()
		r.d.slots = append(r.d.slots, r.s)
		r.d.mu.Unlock()
	}
}

// Call sends head and the body pieces (from the caller's memory, in
// place) as one request and waits for the reply. A reply whose payload is
// len(into) bytes is received straight into into. It fails wrapping
// ErrLost when the session is lost first; ctx ending fails it too.
func (c *Conn) Call(ctx context.Context, head []byte, body [][]byte, into []byte) (Reply, error) {
	if len(head) > MaxHeadBytes || len(body) > maxBody {
		return Reply{}, fmt.Errorf("%w: a head of %d bytes and %d body pieces", ErrRefused, len(head), len(body))
	}
	d, n := c.d, c.d.n
	s := d.slot()
	k := c.fillRequest(s, head, body)
	id := d.nextID.Add(1) & tagIDMask
	var sendReq, recvReq unsafe.Pointer
	received := false
	var reply Reply
	unpin := func() {
		if s.pinned {
			s.pin.Unpin()
			s.pinned = false
		}
	}
	n.mu.Lock()
	if n.closed || c.gone || c.lost.Load() != nil {
		n.mu.Unlock()
		unpin()
		Reply{d: d, s: s}.Release()
		if e := c.lost.Load(); e != nil {
			return Reply{}, *e
		}
		return Reply{}, fmt.Errorf("%w: %w", ErrLost, errClosed)
	}
	var st C.int
	sendReq = C.spx_send_iov(c.ep, s.iov.p, C.size_t(k), C.uint64_t(rpcTag(kindRequest, len(head), id)), &st)
	n.mu.Unlock()
	if sendReq == nil && st != statusOK {
		unpin()
		Reply{d: d, s: s}.Release()
		return Reply{}, fmt.Errorf("%w: %w", ErrLost, statusError(st))
	}
	var idleSince time.Time
	err := n.await(ctx, func() (bool, bool, error) {
		if c.gone {
			return false, false, fmt.Errorf("%w: %w", ErrLost, errClosed)
		}
		moved := false
		if sendReq != nil {
			_, mv, err := reqDone(&sendReq)
			moved = moved || mv
			if err != nil {
				return false, moved, fmt.Errorf("%w: %w", ErrLost, err)
			}
		}
		if !received && recvReq == nil {
			var err error
			var got bool
			if recvReq, reply, got, received, err = c.probeReply(s, id, into); err != nil {
				return false, true, err
			}
			moved = moved || got
		}
		if recvReq != nil {
			done, mv, err := reqDone(&recvReq)
			moved = moved || mv
			if err != nil {
				return false, moved, fmt.Errorf("%w: %w", ErrLost, err)
			}
			received = done
		}
		if received && sendReq == nil {
			return true, moved, nil
		}
		// Lost: once nothing has moved for a while, since the reply may
		// have come just before the server went.
		if moved {
			idleSince = time.Time{}
		} else if idleSince.IsZero() {
			idleSince = time.Now()
		}
		if time.Since(idleSince) >= lostGrace/10 {
			if e := c.lost.Load(); e != nil {
				return false, moved, *e
			}
			if c.ep.failed != 0 {
				return false, moved, fmt.Errorf("%w: endpoint failed: %w", ErrLost, statusError(C.int(c.ep.status)))
			}
		}
		return false, moved, nil
	})
	if err != nil {
		c.abandonCall(s, sendReq, recvReq)
		return Reply{}, err
	}
	unpin()
	return reply, nil
}

// fillRequest puts a call's envelope (the grant), head and body in the
// slot's send vector, pinning the body, and returns the vector's length.
func (c *Conn) fillRequest(s *slot, head []byte, body [][]byte) int {
	hp := pad8(len(head))
	grow(&s.head, envelopeBytes+hp)
	env := s.head.bytes(envelopeBytes + hp)
	binary.LittleEndian.PutUint64(env, c.grant.ID)
	copy(env[8:24], c.grant.Key[:])
	clear(env[24:envelopeBytes])
	copy(env[envelopeBytes:], head)
	s.iov.set(0, s.head.p, envelopeBytes+hp)
	k := 1
	for _, b := range body {
		if len(b) == 0 {
			continue
		}
		s.pin.Pin(unsafe.SliceData(b))
		s.pinned = true
		s.iov.set(k, unsafe.Pointer(unsafe.SliceData(b)), len(b))
		k++
	}
	return k
}

// probeReply looks for the reply to call id and, when it has come, starts
// receiving it: straight into into when the payload fits it exactly, else
// into the slot's scratch buffer. It returns the receive under way (nil
// when it completed at once), the reply it fills, whether the reply has
// come, and whether it was received already.
func (c *Conn) probeReply(s *slot, id uint64, into []byte) (recvReq unsafe.Pointer, reply Reply, got, received bool, err error) {
	n := c.d.n
	var mlen C.size_t
	var full C.uint64_t
	msg := C.spx_probe_mask(n.w, C.uint64_t(rpcTag(kindReply, 0, id)), C.uint64_t(0xf<<tagKindShift|tagIDMask), &mlen, &full)
	if msg == nil {
		return nil, Reply{}, false, false, nil
	}
	headLen := int(uint64(full)>>tagHeadShift) & tagHeadMask
	rhp := pad8(headLen)
	size := int(mlen)
	reply = Reply{d: c.d, s: s}
	var st C.int
	if into != nil && size == rhp+len(into) && size >= rhp {
		grow(&s.rhead, rhp)
		s.riov.set(0, s.rhead.p, rhp)
		s.pin.Pin(unsafe.SliceData(into))
		s.pinned = true
		s.riov.set(1, unsafe.Pointer(unsafe.SliceData(into)), len(into))
		reply.Head, reply.Payload, reply.InPlace = s.rhead.bytes(rhp)[:headLen], into, true
		recvReq = C.spx_msg_recv_iov(n.w, s.riov.p, 2, msg, &st)
	} else {
		grow(&s.scratch, max(size, 1))
		s.riov.set(0, s.scratch.p, size)
		all := s.scratch.bytes(size)
		if size < rhp {
			rhp, headLen = size, size
		}
		reply.Head, reply.Payload = all[:headLen], all[rhp:]
		recvReq = C.spx_msg_recv_iov(n.w, s.riov.p, 1, msg, &st)
	}
	if recvReq == nil {
		if st != statusOK {
			return nil, reply, true, false, fmt.Errorf("%w: %w", ErrLost, statusError(st))
		}
		return nil, reply, true, true, nil
	}
	return recvReq, reply, true, false, nil
}

// abandonCall gives up a failed call: requests still under way are left
// to the worker with the buffers and pins they use, which are released
// when they end; else the slot is released now.
func (c *Conn) abandonCall(s *slot, sendReq, recvReq unsafe.Pointer) {
	n := c.d.n
	n.mu.Lock()
	orphaned := false
	if !n.closed {
		var pin *runtime.Pinner
		if s.pinned {
			pin = &s.pin
		}
		orphaned = n.abandon([]unsafe.Pointer{sendReq, recvReq}, pin, s.head, s.rhead, s.scratch)
	}
	n.mu.Unlock()
	if !orphaned {
		if s.pinned {
			s.pin.Unpin()
			s.pinned = false
		}
		Reply{d: c.d, s: s}.Release()
	}
}

// Close closes the Dialer's sessions and destroys its worker.
func (d *Dialer) Close() error {
	d.once.Do(func() {
		d.mu.Lock()
		eps := make([]*C.spx_ep, 0, len(d.conns))
		for c := range d.conns {
			c.Lose(errClosed)
			eps = append(eps, c.ep)
		}
		d.conns = map[*Conn]struct{}{}
		d.mu.Unlock()
		d.n.destroy(eps)
		d.mu.Lock()
		for _, s := range d.slots {
			s.head.free()
			s.rhead.free()
			s.scratch.free()
			C.free(unsafe.Pointer(s.iov.p))
			C.free(unsafe.Pointer(s.riov.p))
		}
		d.slots = nil
		d.mu.Unlock()
	})
	return nil
}
