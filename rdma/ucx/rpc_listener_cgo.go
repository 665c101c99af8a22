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
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

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
