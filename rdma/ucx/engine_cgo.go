//go:build cgo && linux

package ucx

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// segmentBytes is the largest message a Send posts: larger sends go
	// out as several messages in flight at once, which the receiver takes
	// straight into its buffer.
	segmentBytes = 256 << 10
	// bounceBytes is the size of each direction's bounce buffer: messages
	// this small are copied through it rather than pinned.
	bounceBytes = 8 << 10
	// maxPollWait bounds one sleep on the worker's event descriptor, a
	// safety net for a wake-up another waiter consumed.
	maxPollWait = 10 * time.Millisecond
	// spinWait is how long a waiter keeps polling the worker after the
	// last thing moved before it sleeps on the event descriptor: UCX's
	// software transports (TCP, shared memory) move bytes only while
	// someone polls, and a sleep's wake-up costs tens of microseconds per
	// protocol step, so a transfer in progress is polled; an idle link
	// sleeps.
	spinWait = 50 * time.Microsecond
	// lostGrace is how long a call goes on taking what has arrived after
	// its peer's stream closed or its endpoint failed: a peer that ends
	// right after its last send may close before this rank has taken it
	// (on a loaded host that can be milliseconds).
	lostGrace = 100 * time.Millisecond
	// tagSeqBits holds a message's sequence number in its tag; the sender's
	// rank is above it.
	tagSeqBits = 40
	// abandonWait bounds how long a failed call waits for its cancelled
	// requests; the rest are left to Close.
	abandonWait = 50 * time.Millisecond
	// closeWait bounds how long Close waits for endpoints to close.
	closeWait = 2 * time.Second
	// flushWait bounds it for endpoints without peer failure reports.
	flushWait = 200 * time.Millisecond

	statusOK         = 0
	statusInProgress = 1
	statusBusy       = -15
	// statusUnreachable is UCS_ERR_UNREACHABLE.
	statusUnreachable = -6
)

var loadOnce struct {
	sync.Once
	err error
}

// load resolves libucp's entry points, once.
func load() error {
	loadOnce.Do(func() {
		var buf [512]C.char
		if C.spx_load(&buf[0], C.size_t(len(buf))) != 0 {
			loadOnce.err = fmt.Errorf("%w: %s", ErrUnavailable, C.GoString(&buf[0]))
		}
	})
	return loadOnce.err
}

// version is the loaded UCX's version; load must have succeeded.
func version() string { return C.GoString(C.spx_version()) }

func statusError(st C.int) error {
	return errors.New("ucx: " + C.GoString(C.spx_status_string(st)))
}

// tcpRndvThresh is the rendezvous threshold the parameter server's sessions
// (rpc_listener_cgo.go, rpc_dialer_cgo.go) use on UCX's TCP transport:
// above their messages' usual size, so requests and replies go eagerly,
// landing in UCX's buffers while the other end is busy. The collectives'
// link leaves the threshold to UCX: it receives a whole chunk in place at
// once, and its rendezvous transfers then moved twice the bytes of eager
// ones at 16 MiB (docs/rdma.md).
const tcpRndvThresh = "1m"

// rndvThresh is the rendezvous threshold a worker starts with: "" leaves
// it to UCX. Only the parameter server's sessions (eagerTCP) on UCX's TCP
// transport alone (UCX_TLS=tcp) change it, and never when the user set
// UCX_RNDV_THRESH.
func rndvThresh(eagerTCP bool) string {
	if _, set := os.LookupEnv("UCX_RNDV_THRESH"); set || !eagerTCP {
		return ""
	}
	if strings.TrimSpace(os.Getenv("UCX_TLS")) != "tcp" {
		return ""
	}
	return tcpRndvThresh
}

// direction is the state of sending to, or receiving from, one peer. Only
// the one goroutine that sends to (receives from) the peer touches it,
// under the engine's worker lock where UCX is involved.
type direction struct {
	seq      uint64
	pin      *runtime.Pinner
	pinned   bool
	bounce   unsafe.Pointer // C memory
	staging  unsafe.Pointer // C memory for a message larger than asked for
	stageCap int
	leftover []byte         // the unread rest of such a message
	spare    []byte         // leftover's reusable backing array
	land     unsafe.Pointer // C memory the messages of a RecvInPlace land in
	landCap  int
	// inPlace says whether RecvInPlace serves d: 0 not yet known, 1 yes,
	// -1 no (its endpoint is over shared memory).
	inPlace int8
	// reqs are the call's requests in the order posted, nil once ended
	// (or ended at once); a receive's ends[i] is where the bytes of
	// reqs[i] end in its buffer.
	reqs   []unsafe.Pointer
	ends   []int
	lost   atomic.Pointer[error] // set by the stream watcher
	broken error                 // a failed call left requests behind
}

func newDirection() *direction {
	return &direction{pin: new(runtime.Pinner), bounce: C.malloc(bounceBytes), reqs: make([]unsafe.Pointer, 0, 64)}
}

func (d *direction) unpin() {
	if d.pinned {
		d.pin.Unpin()
		d.pinned = false
	}
}

// engine is one rank's UCP worker and its endpoints to the neighbours
// whose streams chose UCX. It implements collective.Link for them.
type engine struct {
	rank    int
	timeout time.Duration

	// life is held shared by every call and exclusively by Close, so the
	// worker is never destroyed under a call.
	life   sync.RWMutex
	closed bool

	mu   sync.Mutex // the worker lock: every UCP call holds it
	ctx  unsafe.Pointer
	w    unsafe.Pointer
	efd  C.int
	addr []byte
	eps  map[int]*C.spx_ep // C memory; fixed once connected
	// noPeerErrors is set once UCX could not give an endpoint peer
	// failure reports (shared memory): later endpoints go without.
	noPeerErrors bool

	wakeMu  sync.RWMutex // guards wake against Close
	wake    int          // eventfd: interrupts, cancellations, others' progress
	blocked atomic.Int32 // waiters asleep on the event descriptors

	out, in map[int]*direction // fixed once connected
	streams []*net.TCPConn

	// Requests a failed call could not end, and the pins of the memory
	// they may still touch: Close ends them before the worker goes.
	orphans    []unsafe.Pointer
	orphanPins []*runtime.Pinner

	interrupted atomic.Bool
	closeOnce   sync.Once
	wg          sync.WaitGroup // stream watchers
}

// newEngine starts a UCP worker (UCX reads UCX_TLS, UCX_NET_DEVICES and
// its other variables now) and gets its address.
func newEngine(rank int, timeout time.Duration) (*engine, error) {
	if err := load(); err != nil {
		return nil, err
	}
	e := &engine{rank: rank, timeout: timeout, wake: -1,
		eps: make(map[int]*C.spx_ep), out: make(map[int]*direction), in: make(map[int]*direction)}
	var err error
	if e.ctx, e.w, e.efd, e.wake, err = startWorker(rndvThresh(false)); err != nil {
		return nil, err
	}
	if e.addr, err = workerAddress(e.w); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// startWorker starts a UCP context and worker (UCX reads its variables
// now, the rendezvous threshold set to thresh unless it is "") and makes
// the eventfd that wakes its waiters; on error nothing is left open.
func startWorker(thresh string) (ctx, w unsafe.Pointer, efd C.int, wake int, err error) {
	var rndv *C.char
	if thresh != "" {
		rndv = C.CString(thresh)
		defer C.free(unsafe.Pointer(rndv))
	}
	if st := C.spx_init(&ctx, &w, &efd, rndv); st != statusOK {
		return nil, nil, 0, -1, fmt.Errorf("start a UCP worker: %w", statusError(st))
	}
	wake, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		C.spx_cleanup(ctx, w)
		return nil, nil, 0, -1, fmt.Errorf("create an eventfd: %w", err)
	}
	return ctx, w, efd, wake, nil
}

// workerAddress returns worker w's address, for its peers' endpoints.
func workerAddress(w unsafe.Pointer) ([]byte, error) {
	var addr unsafe.Pointer
	var alen C.size_t
	if st := C.spx_address(w, &addr, &alen); st != statusOK {
		return nil, fmt.Errorf("get the UCP worker address: %w", statusError(st))
	}
	defer C.spx_release_address(w, addr)
	return C.GoBytes(addr, C.int(alen)), nil
}

// address is the worker's address, for the peers' endpoints.
func (e *engine) address() []byte { return e.addr }

// connect creates the endpoint to peer (once) and the state of the
// directions to and from it that use UCX. c is the mesh stream of that
// direction, kept open to learn at once when the peer goes.
func (e *engine) connect(peer int, addr []byte, out bool, c *net.TCPConn) error {
	if _, ok := e.eps[peer]; !ok {
		ep := (*C.spx_ep)(C.calloc(1, C.size_t(unsafe.Sizeof(C.spx_ep{}))))
		caddr := C.CBytes(addr)
		// UCX's peer failure reports where the transports have them; the
		// mesh stream's watcher and the timeout cover the others (shared
		// memory).
		e.mu.Lock()
		st := C.int(statusUnreachable)
		if !e.noPeerErrors {
			st = C.spx_ep_create(e.w, caddr, ep, 1)
		}
		if st == statusUnreachable {
			e.noPeerErrors = true
			st = C.spx_ep_create(e.w, caddr, ep, 0)
		}
		e.mu.Unlock()
		C.free(caddr)
		if st != statusOK {
			C.free(unsafe.Pointer(ep))
			return fmt.Errorf("connect a UCP endpoint to rank %d: %w", peer, statusError(st))
		}
		e.eps[peer] = ep
	}
	d := newDirection()
	if out {
		e.out[peer] = d
	} else {
		e.in[peer] = d
	}
	e.streams = append(e.streams, c)
	e.wg.Add(1)
	go e.watch(peer, d, c)
	return nil
}

// watch waits for the peer to close its end of direction d's mesh stream:
// it only does when its process ends or closes its communicator, so the
// calls waiting on d fail at once rather than at the timeout. (A peer that
// goes closes every stream it has, so each of its directions learns.) The
// watcher touches only d: connect is still filling the engine's maps.
func (e *engine) watch(peer int, d *direction, c *net.TCPConn) {
	defer e.wg.Done()
	var b [1]byte
	_, err := c.Read(b[:])
	if err == nil {
		err = errors.New("unexpected data")
	}
	if e.interrupted.Load() {
		return
	}
	lost := fmt.Errorf("connection to rank %d lost: %w", peer, err)
	if errors.Is(err, io.EOF) {
		lost = fmt.Errorf("rank %d closed its link: %w", peer, io.ErrUnexpectedEOF)
	}
	d.lost.CompareAndSwap(nil, &lost)
	e.signal()
}

// signal wakes the waiters asleep on the event descriptors.
func (e *engine) signal() {
	e.wakeMu.RLock()
	defer e.wakeMu.RUnlock()
	if e.wake < 0 {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(e.wake, one[:])
}

func tagOf(sender int, seq uint64) C.uint64_t {
	return C.uint64_t(uint64(sender)<<tagSeqBits | seq&(1<<tagSeqBits-1))
}

var (
	errInterrupted = errors.New("ucx: interrupted")
	errClosed      = errors.New("ucx: link closed")
)

// Send implements collective.Link.
func (e *engine) Send(ctx context.Context, peer int, p []byte) error {
	e.life.RLock()
	defer e.life.RUnlock()
	d, ep := e.out[peer], e.eps[peer]
	if d == nil || ep == nil {
		return fmt.Errorf("ucx: rank %d has no link to send to rank %d", e.rank, peer)
	}
	if err := e.check(ctx, d, ep, true); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	d.reqs = d.reqs[:0]
	e.mu.Lock()
	if len(p) <= bounceBytes {
		C.memcpy(d.bounce, unsafe.Pointer(unsafe.SliceData(p)), C.size_t(len(p)))
		var st C.int
		r := C.spx_send(ep, d.bounce, C.size_t(len(p)), tagOf(e.rank, d.seq), &st)
		d.seq++
		if r != nil {
			d.reqs = append(d.reqs, r)
		} else if st != statusOK {
			e.mu.Unlock()
			return e.fail(d, statusError(st))
		}
	} else {
		// UCX keeps the address until the request completes: the memory
		// must not move, so it stays pinned until then.
		d.pin.Pin(unsafe.SliceData(p))
		d.pinned = true
		for off := 0; off < len(p); off += segmentBytes {
			n := min(segmentBytes, len(p)-off)
			var st C.int
			r := C.spx_send(ep, unsafe.Pointer(&p[off]), C.size_t(n), tagOf(e.rank, d.seq), &st)
			d.seq++
			if r != nil {
				d.reqs = append(d.reqs, r)
			} else if st != statusOK {
				e.mu.Unlock()
				return e.fail(d, statusError(st))
			}
		}
	}
	e.mu.Unlock()
	if err := e.wait(ctx, d, ep); err != nil {
		return err
	}
	d.unpin()
	return nil
}

// Recv implements collective.Link. Messages come in the order sent (their
// tags carry the sender's sequence number); each goes straight into p
// when it fits, and otherwise through the staging buffer, whose rest the
// next Recv reads first. Messages are taken as they arrive while earlier
// ones are still landing, so a large receive keeps several in flight.
func (e *engine) Recv(ctx context.Context, peer int, p []byte) error {
	e.life.RLock()
	defer e.life.RUnlock()
	d, ep := e.in[peer], e.eps[peer]
	if d == nil || ep == nil {
		return fmt.Errorf("ucx: rank %d has no link to receive from rank %d", e.rank, peer)
	}
	if err := e.check(ctx, d, ep, false); err != nil {
		return err
	}
	off := copy(p, d.leftover)
	d.leftover = d.leftover[off:]
	if off == len(p) {
		return nil
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, e.signal)
		defer stop()
	}
	rs := e.startRecv(d)
	for {
		e.mu.Lock()
		pending, failed, err := e.pollRecv(d, peer, p, off, &rs)
		if err != nil {
			e.mu.Unlock()
			return e.fail(d, err)
		}
		switch {
		case failed != statusOK:
			err = statusError(failed)
		case pending == 0 && (off+rs.posted == len(p) || rs.staged > 0):
			e.mu.Unlock()
			return e.finishRecv(d, p, off+rs.posted, rs.staged, rs.stageWant)
		case time.Now().After(rs.deadline):
			what := "no progress"
			if pending == 0 {
				what = "nothing"
			}
			err = fmt.Errorf("ucx: %s from rank %d for %s: %w", what, peer, e.timeout, os.ErrDeadlineExceeded)
		default:
			err = e.check(ctx, d, ep, time.Since(rs.moved) >= lostGrace)
		}
		if err != nil {
			e.mu.Unlock()
			return e.fail(d, err)
		}
		e.pause(rs.moved, rs.deadline)
	}
}

// recvState is where a receive stands: the bytes of its buffer taken by
// posted receives, a message staged (its length, and how much of it the
// buffer wants), when something last moved, and when it gives up.
type recvState struct {
	posted, staged, stageWant int
	moved, deadline           time.Time
}

// startRecv starts a receive on d.
func (e *engine) startRecv(d *direction) recvState {
	d.reqs, d.ends = d.reqs[:0], d.ends[:0]
	now := time.Now()
	return recvState{moved: now, deadline: now.Add(e.timeout)}
}

// pollRecv, under the worker lock, drives the worker, posts receives for
// the messages from peer that have come (into p from off on, postRecvs)
// and frees the requests that ended; anything moving pushes rs's
// deadline on. It returns how many requests are under way and the status
// of a failed one.
func (e *engine) pollRecv(d *direction, peer int, p []byte, off int, rs *recvState) (pending int, failed C.int, err error) {
	if e.progress() {
		rs.moved = time.Now()
	}
	var got bool
	if rs.posted, rs.staged, rs.stageWant, got, err = e.postRecvs(d, peer, p, off, rs.posted, rs.staged, rs.stageWant); err != nil {
		return 0, statusOK, err
	}
	pending, failed, ended := pollRequests(d)
	if got || ended {
		rs.moved = time.Now()
		rs.deadline = rs.moved.Add(e.timeout)
	}
	return pending, failed, nil
}

// postRecvs, under the worker lock, starts receiving the messages from
// peer that have come, in order, into p from off+posted on (off bytes
// came from a leftover), until p is spoken for or a message larger than
// what is left is staged. It returns the new posted, staged and
// stageWant, and whether a message came.
func (e *engine) postRecvs(d *direction, peer int, p []byte, off, posted, staged, stageWant int) (int, int, int, bool, error) {
	got := false
	for off+posted < len(p) && staged == 0 {
		var mlen C.size_t
		msg := C.spx_probe(e.w, tagOf(peer, d.seq), &mlen)
		if msg == nil {
			break
		}
		d.seq++
		got = true
		want := len(p) - off - posted
		var st C.int
		var r unsafe.Pointer
		if int(mlen) <= want {
			if !d.pinned {
				d.pin.Pin(unsafe.SliceData(p))
				d.pinned = true
			}
			r = C.spx_msg_recv(e.w, unsafe.Pointer(&p[off+posted]), mlen, msg, &st)
			posted += int(mlen)
		} else {
			if int(mlen) > d.stageCap {
				d.staging = C.realloc(d.staging, mlen)
				d.stageCap = int(mlen)
			}
			r = C.spx_msg_recv(e.w, d.staging, mlen, msg, &st)
			staged, stageWant = int(mlen), want
		}
		if r == nil && st != statusOK {
			return posted, staged, stageWant, got, statusError(st)
		}
		d.reqs, d.ends = append(d.reqs, r), append(d.ends, off+posted)
	}
	return posted, staged, stageWant, got, nil
}

// pollRequests, under the worker lock, frees d's requests that ended. It
// returns how many are still under way, the status of a failed one, and
// whether any ended.
func pollRequests(d *direction) (pending int, failed C.int, ended bool) {
	for i, r := range d.reqs {
		if r == nil {
			continue
		}
		st := C.spx_request_status(r)
		if st == statusInProgress {
			pending++
			continue
		}
		C.spx_request_free(r)
		d.reqs[i] = nil
		ended = true
		if st != statusOK {
			failed = st
		}
	}
	return pending, failed, ended
}

// finishRecv ends a Recv whose requests have all completed: off bytes of
// p are in place, and a staged message (staged bytes, want of them for
// p) is copied in, its rest kept for the next Recv.
func (e *engine) finishRecv(d *direction, p []byte, off, staged, want int) error {
	if staged > 0 {
		stage := unsafe.Slice((*byte)(d.staging), staged)
		copy(p[off:], stage[:want])
		d.spare = append(d.spare[:0], stage[want:]...)
		d.leftover = d.spare
	}
	d.unpin()
	return nil
}

// progress drives the worker and reports whether it moved anything; e.mu
// is held. Others asleep are woken when it did, since it may have been
// theirs.
func (e *engine) progress() bool {
	moved := false
	for i := 0; i < 64 && C.spx_progress(e.w) > 0; i++ {
		moved = true
	}
	if moved && e.blocked.Load() > 0 {
		e.signal()
	}
	return moved
}

// check returns why a call on d cannot go on, or nil. A lost mesh stream
// or failed endpoint counts only when idle is set: the peer may have sent
// its last messages and ended (its stream closing) before this rank took
// them, so a call stops for that only after a while in which nothing
// moved.
func (e *engine) check(ctx context.Context, d *direction, ep *C.spx_ep, idle bool) error {
	switch {
	case e.closed:
		return errClosed
	case e.interrupted.Load():
		return errInterrupted
	case d.broken != nil:
		return d.broken
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if !idle {
		return nil
	}
	if err := d.lost.Load(); err != nil {
		return *err
	}
	if ep.failed != 0 {
		return fmt.Errorf("ucx endpoint failed: %w", statusError(C.int(ep.status)))
	}
	return nil
}

// wait drives the worker until every request in d.reqs has completed. A
// request completing restarts the timeout; a failure gives up on the rest.
func (e *engine) wait(ctx context.Context, d *direction, ep *C.spx_ep) error {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, e.signal)
		defer stop()
	}
	deadline := time.Now().Add(e.timeout)
	for moved := time.Now(); ; {
		e.mu.Lock()
		if e.progress() {
			moved = time.Now()
		}
		pending := 0
		var failed C.int
		for i, r := range d.reqs {
			if r == nil {
				continue
			}
			st := C.spx_request_status(r)
			if st == statusInProgress {
				pending++
				continue
			}
			C.spx_request_free(r)
			d.reqs[i] = nil
			moved = time.Now()
			deadline = moved.Add(e.timeout)
			if st != statusOK {
				failed = st
			}
		}
		var err error
		switch {
		case failed != statusOK:
			err = statusError(failed)
		case pending == 0:
			e.mu.Unlock()
			return nil
		case time.Now().After(deadline):
			err = fmt.Errorf("ucx: no progress for %s: %w", e.timeout, os.ErrDeadlineExceeded)
		default:
			err = e.check(ctx, d, ep, time.Since(moved) >= lostGrace)
		}
		if err != nil {
			e.mu.Unlock()
			return e.fail(d, err)
		}
		e.pause(moved, deadline)
	}
}

// pause, called with the worker lock held, releases it and waits before
// the caller polls again (pauseWorker), sleeping until deadline at most.
func (e *engine) pause(moved, deadline time.Time) {
	pauseWorker(&e.mu, e.w, &e.blocked, moved, func() { e.sleep(deadline) })
}

// pauseWorker, called with mu (the lock of worker w) held, releases it
// and waits before its caller polls again: while something moved within
// spinWait it only yields the processor; otherwise it arms the worker
// and, unless events are already pending, calls sleep, counted in
// blocked so that a poller that moves something wakes it.
func pauseWorker(mu *sync.Mutex, w unsafe.Pointer, blocked *atomic.Int32, moved time.Time, sleep func()) {
	if time.Since(moved) < spinWait {
		mu.Unlock()
		osYield()
		return
	}
	blocked.Add(1)
	st := C.spx_arm(w)
	mu.Unlock()
	if st != statusBusy {
		sleep()
	}
	blocked.Add(-1)
}

// fail ends a call on d with err: its pending requests are cancelled and,
// briefly, waited for; those still running (a send UCX cannot cancel)
// become orphans that Close ends before the worker goes, with the pins of
// the memory they may touch. d stays broken: its buffers may be in use.
func (e *engine) fail(d *direction, err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range d.reqs {
		if r != nil {
			C.spx_request_cancel(e.w, r)
		}
	}
	end := time.Now().Add(abandonWait)
	for {
		C.spx_progress(e.w)
		live := d.reqs[:0]
		for _, r := range d.reqs {
			if r == nil {
				continue
			}
			if C.spx_request_status(r) == statusInProgress {
				live = append(live, r)
			} else {
				C.spx_request_free(r)
			}
		}
		d.reqs = live
		if len(d.reqs) == 0 || time.Now().After(end) {
			break
		}
		runtime.Gosched()
	}
	if len(d.reqs) > 0 {
		e.orphans = append(e.orphans, d.reqs...)
		d.reqs = make([]unsafe.Pointer, 0, 64)
		if d.pinned {
			e.orphanPins = append(e.orphanPins, d.pin)
			d.pin, d.pinned = new(runtime.Pinner), false
		}
		d.broken = fmt.Errorf("ucx: an earlier call failed: %w", err)
	}
	d.unpin()
	return err
}

// osYield gives the processor to whatever else wants it, in this
// process or another, before a waiter polls again: a neighbour rank on
// the same core moves the bytes this one waits for, and Go's own
// scheduler cannot hand it the core.
func osYield() {
	unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}

// sleep waits on the worker's event descriptor and the wake eventfd.
func (e *engine) sleep(deadline time.Time) {
	wait := min(time.Until(deadline), maxPollWait)
	if wait <= 0 {
		return
	}
	fds := []unix.PollFd{{Fd: int32(e.efd), Events: unix.POLLIN}, {Fd: int32(e.wake), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, int(wait/time.Millisecond)+1)
	if n > 0 && fds[1].Revents&unix.POLLIN != 0 {
		var b [8]byte
		unix.Read(e.wake, b[:])
	}
}

// Interrupt implements collective.Link.
func (e *engine) Interrupt() {
	e.interrupted.Store(true)
	e.signal()
}

// closeWorker closes eps, waits for their close requests and the
// orphaned ones (requests whose caller gave up, still using memory UCX
// was handed) to end, frees what is left once the wait is over and
// destroys the worker. A forced close needs UCX's peer failure reports;
// without them (noPeerErrors) an endpoint flushes instead, and a flush to
// a peer that is gone never ends: the wait is then flushWait, not
// closeWait. The caller holds the worker's lock.
func closeWorker(ctx, w unsafe.Pointer, eps []*C.spx_ep, orphans []unsafe.Pointer, noPeerErrors bool) {
	reqs := orphans
	for _, ep := range eps {
		if r := C.spx_ep_close(ep, ep.peer_errors); r != nil {
			reqs = append(reqs, r)
		}
	}
	wait := closeWait
	if noPeerErrors {
		wait = flushWait
	}
	for end := time.Now().Add(wait); len(reqs) > 0 && time.Now().Before(end); {
		C.spx_progress(w)
		live := reqs[:0]
		for _, r := range reqs {
			if C.spx_request_status(r) == statusInProgress {
				live = append(live, r)
			} else {
				C.spx_request_free(r)
			}
		}
		reqs = live
		runtime.Gosched()
	}
	for _, r := range reqs {
		C.spx_request_free(r)
	}
	C.spx_cleanup(ctx, w)
}

// Close implements collective.Link. The streams close (the neighbours'
// watchers see it) and, once no call is left inside, the endpoints close,
// every request ends, the worker goes, and only then is the memory the
// requests used released.
func (e *engine) Close() error {
	e.closeOnce.Do(func() {
		e.Interrupt()
		for _, c := range e.streams {
			c.Close()
		}
		e.wg.Wait()
		e.life.Lock()
		defer e.life.Unlock()
		e.closed = true
		e.mu.Lock()
		eps := make([]*C.spx_ep, 0, len(e.eps))
		for _, ep := range e.eps {
			eps = append(eps, ep)
		}
		closeWorker(e.ctx, e.w, eps, e.orphans, e.noPeerErrors)
		e.mu.Unlock()
		e.wakeMu.Lock()
		unix.Close(e.wake)
		e.wake = -1
		e.wakeMu.Unlock()
		for _, ep := range e.eps {
			C.free(unsafe.Pointer(ep))
		}
		for _, pin := range e.orphanPins {
			pin.Unpin()
		}
		for _, set := range []map[int]*direction{e.out, e.in} {
			for _, d := range set {
				d.pin.Unpin()
				C.free(d.bounce)
				C.free(d.staging)
				C.free(d.land)
			}
		}
	})
	return nil
}

// transports returns the transports of the lanes of the engine's
// endpoints (laneTransports), each once, sorted.
func (e *engine) transports() []string {
	buf := (*C.char)(C.malloc(epInfoBytes))
	defer C.free(unsafe.Pointer(buf))
	var out []string
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ep := range e.eps {
		for _, t := range epTransports(ep, buf) {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

// resources returns the transports UCX can use in the engine's context
// ("tcp/lo", "posix/memory", "rc_mlx5/mlx5_0:1"), whether or not a peer
// is reached over them yet.
func (e *engine) resources() []string {
	buf := (*C.char)(C.malloc(epInfoBytes))
	defer C.free(unsafe.Pointer(buf))
	if C.spx_context_info(e.ctx, buf, epInfoBytes) != 0 {
		return nil
	}
	return resourceTransports(C.GoString(buf))
}

// epTransports returns the transports of ep's lanes (laneTransports),
// read through buf (epInfoBytes of C memory); the worker lock is held.
func epTransports(ep *C.spx_ep, buf *C.char) []string {
	if C.spx_ep_info(ep, buf, epInfoBytes) != 0 {
		return nil
	}
	return laneTransports(C.GoString(buf))
}

// epInfoBytes bounds what is read of UCX's account of an endpoint: its
// lanes come first, in a few hundred bytes.
const epInfoBytes = 16 << 10
