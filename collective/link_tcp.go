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
}

var _ Linker = TCPLinker{}

// Name implements Linker.
func (TCPLinker) Name() string { return "tcp" }

// Link implements Linker.
func (l TCPLinker) Link(_ context.Context, s LinkSetup) (Link, error) {
	t := &tcpLink{rank: s.Rank, timeout: s.Timeout, out: s.Out, in: s.In}
	for _, c := range t.conns() {
		c.SetNoDelay(true)
		if l.SocketBufferBytes > 0 {
			c.SetReadBuffer(l.SocketBufferBytes)
			c.SetWriteBuffer(l.SocketBufferBytes)
		}
	}
	return t, nil
}

// tcpLink moves bytes over one TCP connection per directed link.
type tcpLink struct {
	rank        int
	timeout     time.Duration
	out, in     []*net.TCPConn // by peer rank; fixed once built
	interrupted atomic.Bool
	closeOnce   sync.Once
}

var _ Link = (*tcpLink)(nil)

// errInterrupted is the I/O error of a call made after the mesh failed.
var errInterrupted = errors.New("interrupted")

// Send implements Link.
func (t *tcpLink) Send(ctx context.Context, peer int, p []byte) error {
	c, err := t.conn(t.out, peer, "send to")
	if err != nil {
		return err
	}
	return t.transfer(ctx, c, p, true)
}

// Recv implements Link.
func (t *tcpLink) Recv(ctx context.Context, peer int, p []byte) error {
	c, err := t.conn(t.in, peer, "receive from")
	if err != nil {
		return err
	}
	return t.transfer(ctx, c, p, false)
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
		dl := time.Now().Add(t.timeout)
		if write {
			err = c.SetWriteDeadline(dl)
		} else {
			err = c.SetReadDeadline(dl)
		}
		// Re-check after arming the deadline: a cancellation or interrupt
		// that cleared it just before must not be lost.
		if err == nil && (ctx.Err() != nil || t.interrupted.Load()) {
			err = errInterrupted
		}
		if err == nil {
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
