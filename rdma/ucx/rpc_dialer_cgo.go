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
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

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
