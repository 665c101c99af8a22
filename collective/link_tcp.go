package collective

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ioPiece bounds the bytes moved under one deadline, so that a large Send
// or Recv that keeps making progress never times out.
const ioPiece = 4 << 20

// TCPLinker builds TCP data links: the mesh's authenticated streams carry
// the data themselves, one connection per directed link.
type TCPLinker struct {
	// SocketBufferBytes sets the kernel send and receive buffers of every
	// connection; zero or negative leaves them to the kernel's autotuning.
	SocketBufferBytes int
	// NoSharedMemory keeps every stream on TCP, even between ranks on one
	// host, which otherwise move their bytes through shared memory
	// (link_shm.go). Both ends of a stream must agree.
	NoSharedMemory bool
}

var _ Linker = TCPLinker{}

// Name implements Linker.
func (TCPLinker) Name() string { return "tcp" }

// Link implements Linker.
func (l TCPLinker) Link(ctx context.Context, s LinkSetup) (Link, error) {
	t := &tcpLink{rank: s.Rank, timeout: s.Timeout, out: s.Out, in: s.In}
	for _, c := range t.conns() {
		c.SetNoDelay(true)
		if l.SocketBufferBytes > 0 {
			c.SetReadBuffer(l.SocketBufferBytes)
			c.SetWriteBuffer(l.SocketBufferBytes)
		}
	}
	var err error
	if t.shmOut, t.shmIn, err = shmSetup(ctx, s, !l.NoSharedMemory); err != nil {
		return nil, err
	}
	if s.Logger != nil {
		rings := 0
		for _, r := range t.shmOut {
			if r != nil {
				rings++
			}
		}
		for _, r := range t.shmIn {
			if r != nil {
				rings++
			}
		}
		s.Logger.Debug("tcp link built", "streams", len(t.conns()), "through_shared_memory", rings)
	}
	return t, nil
}

// tcpLink moves bytes over one TCP connection per directed link.
type tcpLink struct {
	rank    int
	timeout time.Duration
	out, in []*net.TCPConn // by peer rank; fixed once built
	// shmOut and shmIn hold the shared-memory rings of the streams that
	// have one (ranks on this host), by peer rank; their streams then
	// carry only the rings' doorbells.
	shmOut []*shmSender
	shmIn  []*shmReceiver
	// ringMu is held for reading by every call on a ring and for writing
	// by Close while it unmaps them, so no call touches an unmapped ring.
	ringMu      sync.RWMutex
	ringsClosed bool
	interrupted atomic.Bool
	closeOnce   sync.Once
}

var (
	_ Link    = (*tcpLink)(nil)
	_ Carrier = (*tcpLink)(nil)
)

// Over implements Carrier: the streams of ranks on this host carry their
// bytes through shared-memory rings, the others over TCP.
func (t *tcpLink) Over() string {
	rings, sockets := false, false
	note := func(c *net.TCPConn, ring bool) {
		switch {
		case c == nil:
		case ring:
			rings = true
		default:
			sockets = true
		}
	}
	for p, c := range t.out {
		note(c, p < len(t.shmOut) && t.shmOut[p] != nil)
	}
	for p, c := range t.in {
		note(c, p < len(t.shmIn) && t.shmIn[p] != nil)
	}
	switch {
	case rings && sockets:
		return "shared memory+tcp"
	case rings:
		return "shared memory"
	}
	return "tcp"
}

// errInterrupted is the I/O error of a call made after the mesh failed.
var errInterrupted = errors.New("interrupted")

// Send implements Link.
func (t *tcpLink) Send(ctx context.Context, peer int, p []byte) error {
	c, err := t.conn(t.out, peer, "send to")
	if err != nil {
		return err
	}
	if r := t.shmOut[peer]; r != nil {
		return t.viaRing(ctx, c, func(arm armFunc) error { return r.send(p, arm) })
	}
	return t.transfer(ctx, c, p, true)
}

// Recv implements Link.
func (t *tcpLink) Recv(ctx context.Context, peer int, p []byte) error {
	c, err := t.conn(t.in, peer, "receive from")
	if err != nil {
		return err
	}
	if r := t.shmIn[peer]; r != nil {
		return t.viaRing(ctx, c, func(arm armFunc) error { return r.recv(p, arm) })
	}
	return t.transfer(ctx, c, p, false)
}

// RecvInPlace implements inPlaceReceiver: from a peer on this host it
// hands fn the bytes where they lie in the shared ring.
func (t *tcpLink) RecvInPlace(ctx context.Context, peer, n, align int, scratch []byte, fn func([]byte)) (bool, error) {
	c, err := t.conn(t.in, peer, "receive from")
	if err != nil {
		return false, err
	}
	r := t.shmIn[peer]
	if r == nil {
		return false, nil
	}
	return true, t.viaRing(ctx, c, func(arm armFunc) error { return r.recvInPlace(n, align, scratch, fn, arm) })
}

// viaRing runs one call on a shared-memory ring whose doorbell is c: each
// wait on c gets a fresh deadline, so the timeout measures lack of
// progress, and cancellation or an interrupt stops it.
func (t *tcpLink) viaRing(ctx context.Context, c *net.TCPConn, call func(armFunc) error) error {
	t.ringMu.RLock()
	defer t.ringMu.RUnlock()
	if t.interrupted.Load() || t.ringsClosed {
		return errInterrupted
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	}
	err := call(func(c *net.TCPConn, write bool) error { return t.arm(ctx, c, write) })
	if stop != nil && !stop() && ctx.Err() != nil {
		err = ctx.Err()
	}
	return err
}

// arm gives the next write (or read) on c a fresh deadline of the link's
// timeout. It re-checks after arming: a cancellation or interrupt that
// cleared the deadline just before must not be lost.
func (t *tcpLink) arm(ctx context.Context, c *net.TCPConn, write bool) error {
	dl := time.Now().Add(t.timeout)
	var err error
	if write {
		err = c.SetWriteDeadline(dl)
	} else {
		err = c.SetReadDeadline(dl)
	}
	if err == nil && (ctx.Err() != nil || t.interrupted.Load()) {
		err = errInterrupted
	}
	return err
}

func (t *tcpLink) conn(links []*net.TCPConn, peer int, verb string) (*net.TCPConn, error) {
	if peer < 0 || peer >= len(links) || links[peer] == nil {
		return nil, fmt.Errorf("collective: rank %d has no link to %s rank %d", t.rank, verb, peer)
	}
	return links[peer], nil
}

// transfer moves p over c in pieces, each under a fresh deadline, so the
// timeout measures lack of progress rather than total time.
func (t *tcpLink) transfer(ctx context.Context, c *net.TCPConn, p []byte, write bool) error {
	if t.interrupted.Load() {
		return errInterrupted
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	}
	var err error
	for len(p) > 0 && err == nil {
		n := min(len(p), ioPiece)
		if err = t.arm(ctx, c, write); err == nil {
			if write {
				_, err = c.Write(p[:n])
			} else {
				_, err = io.ReadFull(c, p[:n])
			}
		}
		p = p[n:]
	}
	if stop != nil && !stop() && ctx.Err() != nil {
		// The cancellation fired and may have cleared the deadline: this
		// link can no longer be trusted even if the I/O finished.
		err = ctx.Err()
	}
	return err
}

// Interrupt implements Link.
func (t *tcpLink) Interrupt() {
	t.interrupted.Store(true)
	for _, c := range t.conns() {
		c.SetDeadline(aLongTimeAgo)
	}
}

// Close implements Link.
func (t *tcpLink) Close() error {
	t.closeOnce.Do(func() {
		t.Interrupt()
		for _, c := range t.conns() {
			c.Close()
		}
		// Interrupt has made pending calls return: wait for them to
		// leave the rings before unmapping them.
		t.ringMu.Lock()
		t.ringsClosed = true
		closeRings(t.shmOut, t.shmIn)
		t.ringMu.Unlock()
	})
	return nil
}

func (t *tcpLink) conns() []*net.TCPConn {
	var cs []*net.TCPConn
	for _, set := range [][]*net.TCPConn{t.out, t.in} {
		for _, c := range set {
			if c != nil {
				cs = append(cs, c)
			}
		}
	}
	return cs
}
