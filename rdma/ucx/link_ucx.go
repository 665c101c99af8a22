//go:build ucx

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
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/spindle-ml/spindle/collective"
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
	// spinRounds is how many times a waiter polls the worker before it
	// sleeps on the event descriptor: short waits stay fast.
	spinRounds = 64
	// tagSeqBits holds a message's sequence number in its tag; the sender's
	// rank is above it.
	tagSeqBits = 40

	statusOK         = 0
	statusInProgress = 1
	statusBusy       = -15
)

var loadOnce struct {
	sync.Once
	err error
}

func load() error {
	loadOnce.Do(func() {
		var buf [512]C.char
		if C.spx_load(&buf[0], C.size_t(len(buf))) != 0 {
			loadOnce.err = fmt.Errorf("%w: %s", ErrUnavailable, C.GoString(&buf[0]))
		}
	})
	return loadOnce.err
}

// Available reports whether this binary can use UCX: it was built with
// -tags ucx and libucp loads. detail is UCX's version, or why not.
func Available() (ok bool, detail string) {
	if err := load(); err != nil {
		return false, err.Error()
	}
	return true, "UCX " + C.GoString(C.spx_version())
}

func statusError(st C.int) error {
	return errors.New("ucx: " + C.GoString(C.spx_status_string(st)))
}

// NewLinker returns the collective.Linker that moves a communicator's bytes
// over UCX. It fails with ErrUnavailable when libucp cannot be loaded.
func NewLinker() (collective.Linker, error) {
	if err := load(); err != nil {
		return nil, err
	}
	return linker{}, nil
}

type linker struct{}

// Name implements collective.Linker.
func (linker) Name() string { return "ucx" }

// Link implements collective.Linker: it creates a UCP worker, swaps worker
// addresses with each neighbour over the mesh's authenticated streams, and
// keeps the streams open to learn at once when a neighbour dies.
func (linker) Link(ctx context.Context, s collective.LinkSetup) (collective.Link, error) {
	l := &link{rank: s.Rank, timeout: s.Timeout, log: s.Logger, peers: s.Peers,
		out: make(map[int]*direction), in: make(map[int]*direction), eps: make(map[int]*C.spx_ep)}
	if l.timeout <= 0 {
		l.timeout = collective.DefaultTimeout
	}
	if st := C.spx_init(&l.ctx, &l.w, &l.efd); st != statusOK {
		closeStreams(s)
		return nil, fmt.Errorf("start a UCP worker: %w", statusError(st))
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		C.spx_cleanup(l.ctx, l.w)
		closeStreams(s)
		return nil, fmt.Errorf("create an eventfd: %w", err)
	}
	l.wake = wake
	l.ready = true
	for p, c := range s.Out {
		if c != nil {
			l.out[p] = newDirection()
			l.streams = append(l.streams, stream{peer: p, c: c})
		}
	}
	for p, c := range s.In {
		if c != nil {
			l.in[p] = newDirection()
			l.streams = append(l.streams, stream{peer: p, c: c})
		}
	}
	if err := l.connect(ctx); err != nil {
		l.Close()
		return nil, err
	}
	for _, st := range l.streams {
		l.wg.Add(1)
		go l.watch(st)
	}
	return l, nil
}

func closeStreams(s collective.LinkSetup) {
	for _, set := range [][]*net.TCPConn{s.Out, s.In} {
		for _, c := range set {
			if c != nil {
				c.Close()
			}
		}
	}
}

// stream is a mesh stream to a neighbour, kept as a liveness signal.
type stream struct {
	peer int
	c    *net.TCPConn
}

// direction is the state of sending to, or receiving from, one peer. Only
// the one goroutine that sends to (receives from) the peer touches it.
type direction struct {
	seq      uint64
	pin      runtime.Pinner
	pinned   bool // pin holds memory a failed request may still touch
	bounce   unsafe.Pointer
	staging  unsafe.Pointer // C memory for a message larger than asked for
	stageCap int
	leftover []byte // the unread rest of such a message
	spare    []byte // leftover's reusable backing array
	reqs     []unsafe.Pointer
	lost     atomic.Pointer[error]
}

func newDirection() *direction {
	return &direction{bounce: C.malloc(bounceBytes), reqs: make([]unsafe.Pointer, 0, 64)}
}

// link is one rank's UCX data link.
type link struct {
	rank    int
	timeout time.Duration
	log     *slog.Logger
	peers   []string

	mu    sync.Mutex // the worker lock: every UCP call holds it
	ctx   C.ucp_context_h
	w     C.ucp_worker_h
	efd   C.int
	ready bool
	eps   map[int]*C.spx_ep // C memory; fixed once connected

	wake    int          // eventfd: interrupts, cancellations, others' progress
	blocked atomic.Int32 // waiters sleeping on the event descriptors

	out, in map[int]*direction // fixed once built
	streams []stream

	interrupted atomic.Bool
	closeOnce   sync.Once
	wg          sync.WaitGroup // stream watchers
}

var _ collective.Link = (*link)(nil)

// connect swaps worker addresses over every stream and creates one
// endpoint per neighbour.
func (l *link) connect(ctx context.Context) error {
	var addr unsafe.Pointer
	var alen C.size_t
	l.mu.Lock()
	st := C.spx_address(l.w, &addr, &alen)
	l.mu.Unlock()
	if st != statusOK {
		return fmt.Errorf("get the UCP worker address: %w", statusError(st))
	}
	mine := C.GoBytes(addr, C.int(alen))
	l.mu.Lock()
	C.spx_release_address(l.w, addr)
	l.mu.Unlock()

	deadline := time.Now().Add(l.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	// Every stream at once: the two ends of a stream may list it in
	// different places.
	theirs := make([][]byte, len(l.streams))
	var g errgroup.Group
	for i, s := range l.streams {
		g.Go(func() error {
			s.c.SetDeadline(deadline)
			stop := context.AfterFunc(ctx, func() { s.c.SetDeadline(time.Unix(1, 0)) })
			defer stop()
			a, err := swapAddress(s.c, mine)
			s.c.SetDeadline(time.Time{})
			if err != nil {
				return fmt.Errorf("swap UCX worker addresses with rank %d: %w", s.peer, err)
			}
			theirs[i] = a
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, s := range l.streams {
		if _, ok := l.eps[s.peer]; ok {
			continue
		}
		ep := (*C.spx_ep)(C.calloc(1, C.size_t(unsafe.Sizeof(C.spx_ep{}))))
		caddr := C.CBytes(theirs[i])
		l.mu.Lock()
		st := C.spx_ep_create(l.w, caddr, ep)
		l.mu.Unlock()
		C.free(caddr)
		if st != statusOK {
			C.free(unsafe.Pointer(ep))
			return fmt.Errorf("connect a UCP endpoint to rank %d: %w", s.peer, statusError(st))
		}
		l.eps[s.peer] = ep
	}
	return nil
}

// swapAddress writes this worker's address on c and reads the peer's.
func swapAddress(c net.Conn, mine []byte) ([]byte, error) {
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(mine)))
	msg = append(msg, mine...)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		errc <- err
	}()
	var hdr [4]byte
	_, rerr := io.ReadFull(c, hdr[:])
	var theirs []byte
	if rerr == nil {
		n := binary.BigEndian.Uint32(hdr[:])
		if n > 1<<20 {
			rerr = fmt.Errorf("worker address of %d bytes", n)
		} else {
			theirs = make([]byte, n)
			_, rerr = io.ReadFull(c, theirs)
		}
	}
	if werr := <-errc; werr != nil {
		return nil, werr
	}
	return theirs, rerr
}

// watch waits for the peer to close its end of a mesh stream: it only
// does when its process ends or closes its communicator, so the calls
// waiting on it fail at once rather than at the timeout.
func (l *link) watch(s stream) {
	defer l.wg.Done()
	var b [1]byte
	_, err := s.c.Read(b[:])
	if err == nil {
		err = errors.New("unexpected data")
	}
	if l.interrupted.Load() {
		return
	}
	lost := fmt.Errorf("connection to rank %d lost: %w", s.peer, err)
	if errors.Is(err, io.EOF) {
		lost = fmt.Errorf("rank %d closed its link: %w", s.peer, io.ErrUnexpectedEOF)
	}
	for _, d := range []*direction{l.out[s.peer], l.in[s.peer]} {
		if d != nil {
			d.lost.CompareAndSwap(nil, &lost)
		}
	}
	l.signal()
}

// signal wakes the waiters sleeping on the event descriptors.
func (l *link) signal() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(l.wake, one[:])
}

func tagOf(sender int, seq uint64) C.uint64_t {
	return C.uint64_t(uint64(sender)<<tagSeqBits | seq&(1<<tagSeqBits-1))
}

// Send implements collective.Link.
func (l *link) Send(ctx context.Context, peer int, p []byte) error {
	d, ep := l.out[peer], l.eps[peer]
	if d == nil || ep == nil {
		return fmt.Errorf("ucx: rank %d has no link to send to rank %d", l.rank, peer)
	}
	if len(p) == 0 {
		return nil
	}
	if err := l.check(ctx, d, ep); err != nil {
		return err
	}
	d.reqs = d.reqs[:0]
	l.mu.Lock()
	if len(p) <= bounceBytes {
		C.memcpy(d.bounce, unsafe.Pointer(unsafe.SliceData(p)), C.size_t(len(p)))
		var st C.int
		if r := C.spx_send(ep, d.bounce, C.size_t(len(p)), tagOf(l.rank, d.seq), &st); r != nil {
			d.reqs = append(d.reqs, r)
		} else if st != statusOK {
			l.mu.Unlock()
			return statusError(st)
		}
		d.seq++
	} else {
		d.pin.Pin(unsafe.SliceData(p))
		d.pinned = true
		for off := 0; off < len(p); off += segmentBytes {
			n := min(segmentBytes, len(p)-off)
			var st C.int
			r := C.spx_send(ep, unsafe.Pointer(&p[off]), C.size_t(n), tagOf(l.rank, d.seq), &st)
			d.seq++
			if r != nil {
				d.reqs = append(d.reqs, r)
			} else if st != statusOK {
				l.mu.Unlock()
				l.abandon(d)
				return statusError(st)
			}
		}
	}
	l.mu.Unlock()
	if err := l.wait(ctx, d, ep); err != nil {
		return err
	}
	if d.pinned {
		d.pin.Unpin()
		d.pinned = false
	}
	return nil
}

// Recv implements collective.Link. Messages come in the order sent (their
// tags carry the sender's sequence number); each goes straight into p
// when it fits, and otherwise through the staging buffer, whose rest the
// next Recv reads first.
func (l *link) Recv(ctx context.Context, peer int, p []byte) error {
	d, ep := l.in[peer], l.eps[peer]
	if d == nil || ep == nil {
		return fmt.Errorf("ucx: rank %d has no link to receive from rank %d", l.rank, peer)
	}
	off := copy(p, d.leftover)
	d.leftover = d.leftover[off:]
	deadline := time.Now().Add(l.timeout)
	for off < len(p) {
		if err := l.check(ctx, d, ep); err != nil {
			return err
		}
		d.reqs = d.reqs[:0]
		posted, staged, stageWant, done := 0, 0, 0, 0
		l.mu.Lock()
		for spins := 0; ; spins++ {
			l.progress()
			for off+posted < len(p) && staged == 0 {
				var mlen C.size_t
				msg := C.spx_probe(l.w, tagOf(peer, d.seq), &mlen)
				if msg == nil {
					break
				}
				d.seq++
				want := len(p) - off - posted
				var st C.int
				var r unsafe.Pointer
				if int(mlen) <= want {
					if !d.pinned {
						d.pin.Pin(unsafe.SliceData(p))
						d.pinned = true
					}
					r = C.spx_msg_recv(l.w, unsafe.Pointer(&p[off+posted]), mlen, msg, &st)
					posted += int(mlen)
				} else {
					if int(mlen) > d.stageCap {
						d.staging = C.realloc(d.staging, mlen)
						d.stageCap = int(mlen)
					}
					r = C.spx_msg_recv(l.w, d.staging, mlen, msg, &st)
					staged, stageWant = int(mlen), want
				}
				switch {
				case r != nil:
					d.reqs = append(d.reqs, r)
				case st != statusOK:
					l.mu.Unlock()
					l.abandon(d)
					return statusError(st)
				default:
					// Completed at once (an eager message already here).
					done++
				}
			}
			if len(d.reqs) > 0 || done > 0 || spins >= spinRounds {
				break
			}
			l.mu.Unlock()
			runtime.Gosched()
			l.mu.Lock()
		}
		if len(d.reqs) == 0 && done == 0 {
			// Nothing has arrived: sleep until something does.
			l.blocked.Add(1)
			st := C.spx_arm(l.w)
			l.mu.Unlock()
			if st != statusBusy {
				l.sleep(deadline)
			}
			l.blocked.Add(-1)
			if time.Now().After(deadline) {
				return fmt.Errorf("ucx: nothing from rank %d for %s: %w", peer, l.timeout, os.ErrDeadlineExceeded)
			}
			continue
		}
		l.mu.Unlock()
		if err := l.wait(ctx, d, ep); err != nil {
			return err
		}
		off += posted
		if staged > 0 {
			off += copy(p[off:], unsafe.Slice((*byte)(d.staging), staged)[:stageWant])
			d.spare = append(d.spare[:0], unsafe.Slice((*byte)(d.staging), staged)[stageWant:]...)
			d.leftover = d.spare
		}
		deadline = time.Now().Add(l.timeout)
	}
	if d.pinned {
		d.pin.Unpin()
		d.pinned = false
	}
	return nil
}

// progress drives the worker; l.mu is held. Others asleep are woken when
// it moved anything, since it may have been theirs.
func (l *link) progress() {
	moved := false
	for i := 0; i < 64 && C.spx_progress(l.w) > 0; i++ {
		moved = true
	}
	if moved && l.blocked.Load() > 0 {
		l.signal()
	}
}

// check returns why a call on d cannot go on, or nil.
func (l *link) check(ctx context.Context, d *direction, ep *C.spx_ep) error {
	switch {
	case l.interrupted.Load():
		return errInterrupted
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if e := d.lost.Load(); e != nil {
		return *e
	}
	if ep.failed != 0 {
		return fmt.Errorf("ucx endpoint failed: %w", statusError(C.int(ep.status)))
	}
	return nil
}

var errInterrupted = errors.New("ucx: interrupted")

// wait drives the worker until every request in d.reqs has completed. A
// request completing restarts the timeout; a failure cancels the rest.
func (l *link) wait(ctx context.Context, d *direction, ep *C.spx_ep) error {
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, l.signal)
		defer stop()
	}
	deadline := time.Now().Add(l.timeout)
	for spins := 0; ; spins++ {
		l.mu.Lock()
		l.progress()
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
			deadline = time.Now().Add(l.timeout)
			if st != statusOK {
				failed = st
			}
		}
		if pending == 0 {
			l.mu.Unlock()
			if failed != statusOK {
				return statusError(failed)
			}
			return nil
		}
		var err error
		switch {
		case failed != statusOK:
			err = statusError(failed)
		case time.Now().After(deadline):
			err = fmt.Errorf("ucx: no progress for %s: %w", l.timeout, os.ErrDeadlineExceeded)
		default:
			err = l.check(ctx, d, ep)
		}
		if err != nil {
			l.mu.Unlock()
			l.abandon(d)
			return err
		}
		if spins < spinRounds {
			l.mu.Unlock()
			runtime.Gosched()
			continue
		}
		l.blocked.Add(1)
		st := C.spx_arm(l.w)
		l.mu.Unlock()
		if st != statusBusy {
			l.sleep(deadline)
		}
		l.blocked.Add(-1)
	}
}

// abandon cancels d's pending requests and waits, briefly, for them to
// end. Requests that do not (a send UCX cannot cancel) keep d's buffers
// pinned until Close destroys the worker.
func (l *link) abandon(d *direction) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range d.reqs {
		if r != nil {
			C.spx_request_cancel(l.w, r)
		}
	}
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) {
		C.spx_progress(l.w)
		pending := 0
		for i, r := range d.reqs {
			if r == nil {
				continue
			}
			if C.spx_request_status(r) == statusInProgress {
				pending++
				continue
			}
			C.spx_request_free(r)
			d.reqs[i] = nil
		}
		if pending == 0 {
			d.reqs = d.reqs[:0]
			if d.pinned {
				d.pin.Unpin()
				d.pinned = false
			}
			return
		}
	}
}

// sleep waits on the worker's event descriptor and the wake eventfd.
func (l *link) sleep(deadline time.Time) {
	wait := min(time.Until(deadline), maxPollWait)
	if wait <= 0 {
		return
	}
	fds := []unix.PollFd{{Fd: int32(l.efd), Events: unix.POLLIN}, {Fd: int32(l.wake), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, int(wait/time.Millisecond)+1)
	if n > 0 && fds[1].Revents&unix.POLLIN != 0 {
		var b [8]byte
		unix.Read(l.wake, b[:])
	}
}

// Interrupt implements collective.Link.
func (l *link) Interrupt() {
	l.interrupted.Store(true)
	l.signal()
}

// Close implements collective.Link: the streams close (the neighbours'
// watchers see it), the endpoints and the worker go, and the memory that
// requests may have used is released last.
func (l *link) Close() error {
	l.closeOnce.Do(func() {
		l.Interrupt()
		for _, s := range l.streams {
			s.c.Close()
		}
		l.wg.Wait()
		if l.ready {
			l.mu.Lock()
			var reqs []unsafe.Pointer
			for _, ep := range l.eps {
				if r := C.spx_ep_close(l.w, ep, 1); r != nil {
					reqs = append(reqs, r)
				}
			}
			end := time.Now().Add(time.Second)
			for len(reqs) > 0 && time.Now().Before(end) {
				C.spx_progress(l.w)
				live := reqs[:0]
				for _, r := range reqs {
					if C.spx_request_status(r) == statusInProgress {
						live = append(live, r)
					} else {
						C.spx_request_free(r)
					}
				}
				reqs = live
			}
			C.spx_cleanup(l.ctx, l.w)
			l.mu.Unlock()
			unix.Close(l.wake)
		}
		for _, ep := range l.eps {
			C.free(unsafe.Pointer(ep))
		}
		for _, set := range []map[int]*direction{l.out, l.in} {
			for _, d := range set {
				d.pin.Unpin()
				C.free(d.bounce)
				if d.staging != nil {
					C.free(d.staging)
				}
			}
		}
	})
	return nil
}
