package collective

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// memPipeBytes is the buffer of one in-memory directed link, about what a
// loopback TCP connection holds in its socket buffers.
const memPipeBytes = 4 << 20

// MemNetwork is an in-process network of data links with fault injection,
// for tests: the ranks of a communicator built with its Linker exchange
// bytes through memory, and the test can drop, delay or cut the bytes
// between any two of them on purpose, as a real network fails. The mesh
// (hellos, notices, probes) still runs over loopback TCP: only the data is
// in memory, so a test exercises exactly the failure handling that real
// links rely on.
//
// Faults act on bytes sent after they are set:
//   - Drop black-holes one direction: Send succeeds, nothing arrives, and
//     the receiver times out (a silent packet loss that never heals).
//   - Partition drops everything between ranks of different groups.
//   - Delay holds every Send on one direction for a while (latency).
//   - Break resets both directions between two ranks: pending and later
//     calls fail at once, as with a TCP reset.
//
// A rank's link closing (its Comm crashing or closing) breaks every
// direction it is on, as a killed process's sockets do.
type MemNetwork struct {
	mu    sync.Mutex
	pipes map[[2]int]*memPipe
}

// NewMemNetwork returns an empty in-memory network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{pipes: make(map[[2]int]*memPipe)}
}

// Linker returns the Linker that joins a rank to n (Config.Link).
func (n *MemNetwork) Linker() Linker { return memLinker{n} }

// Drop makes bytes sent from rank from to rank to vanish (on) or arrive
// again (off).
func (n *MemNetwork) Drop(from, to int, on bool) {
	p := n.pipe(from, to)
	p.mu.Lock()
	p.drop = on
	p.mu.Unlock()
}

// Delay holds every later Send from rank from to rank to for d before its
// bytes arrive; zero removes the delay.
func (n *MemNetwork) Delay(from, to int, d time.Duration) {
	p := n.pipe(from, to)
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Partition splits the ranks into groups: bytes between ranks of different
// groups are dropped, in both directions, until Heal. Ranks in no group
// are cut off from every group.
func (n *MemNetwork) Partition(groups ...[]int) {
	group := make(map[int]int)
	for g, ranks := range groups {
		for _, r := range ranks {
			group[r] = g + 1
		}
	}
	n.mu.Lock()
	pipes := make([]*memPipe, 0, len(n.pipes))
	for _, p := range n.pipes {
		pipes = append(pipes, p)
	}
	n.mu.Unlock()
	for _, p := range pipes {
		gf, gt := group[p.from], group[p.to]
		p.mu.Lock()
		p.drop = gf == 0 || gt == 0 || gf != gt
		p.mu.Unlock()
	}
}

// Heal removes every drop and partition.
func (n *MemNetwork) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.pipes {
		p.mu.Lock()
		p.drop = false
		p.mu.Unlock()
	}
}

// Break resets both directions between ranks a and b.
func (n *MemNetwork) Break(a, b int) {
	err := fmt.Errorf("connection between ranks %d and %d reset", a, b)
	n.pipe(a, b).breakWith(err)
	n.pipe(b, a).breakWith(err)
}

// pipe returns the directed link from → to, creating it.
func (n *MemNetwork) pipe(from, to int) *memPipe {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [2]int{from, to}
	p, ok := n.pipes[k]
	if !ok {
		p = &memPipe{from: from, to: to, buf: make([]byte, memPipeBytes), changed: make(chan struct{})}
		n.pipes[k] = p
	}
	return p
}

// memPipe is one direction between two ranks: a ring buffer.
type memPipe struct {
	from, to int

	mu      sync.Mutex
	buf     []byte
	head, n int           // unread bytes start at head, n of them
	changed chan struct{} // closed and replaced on every change
	broken  error
	drop    bool
	delay   time.Duration
}

// signal wakes the waiters; p.mu is held.
func (p *memPipe) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *memPipe) breakWith(err error) {
	p.mu.Lock()
	if p.broken == nil {
		p.broken = err
		p.signal()
	}
	p.mu.Unlock()
}

// write copies as much of b as fits and returns how much did.
func (p *memPipe) write(b []byte) int {
	done := 0
	for len(b) > 0 && p.n < len(p.buf) {
		tail := (p.head + p.n) % len(p.buf)
		end := len(p.buf)
		if tail < p.head {
			end = p.head
		}
		k := copy(p.buf[tail:end], b)
		p.n += k
		b = b[k:]
		done += k
	}
	return done
}

// read copies as much as is buffered into b and returns how much did.
func (p *memPipe) read(b []byte) int {
	done := 0
	for len(b) > 0 && p.n > 0 {
		end := min(p.head+p.n, len(p.buf))
		k := copy(b, p.buf[p.head:end])
		p.head = (p.head + k) % len(p.buf)
		p.n -= k
		b = b[k:]
		done += k
	}
	return done
}

type memLinker struct{ n *MemNetwork }

// Name implements Linker.
func (memLinker) Name() string { return "mem" }

// Link implements Linker. The mesh's streams only proved the ranks to each
// other; the data goes through memory.
func (l memLinker) Link(_ context.Context, s LinkSetup) (Link, error) {
	k := &memLink{n: l.n, rank: s.Rank, timeout: s.Timeout, intr: make(chan struct{}),
		out: make(map[int]*memPipe), in: make(map[int]*memPipe)}
	for p, c := range s.Out {
		if c != nil {
			c.Close()
			k.out[p] = l.n.pipe(s.Rank, p)
		}
	}
	for p, c := range s.In {
		if c != nil {
			c.Close()
			k.in[p] = l.n.pipe(p, s.Rank)
		}
	}
	return k, nil
}

// memLink is one rank's view of a MemNetwork.
type memLink struct {
	n         *MemNetwork
	rank      int
	timeout   time.Duration
	out, in   map[int]*memPipe // fixed once built
	intr      chan struct{}
	intrOnce  sync.Once
	closeOnce sync.Once
}

var _ Link = (*memLink)(nil)

// errMemDeadline is a call that made no progress for the timeout.
var errMemDeadline = fmt.Errorf("in-memory link: %w", os.ErrDeadlineExceeded)

// Send implements Link.
func (k *memLink) Send(ctx context.Context, peer int, b []byte) error {
	p, ok := k.out[peer]
	if !ok {
		return fmt.Errorf("collective: rank %d has no link to send to rank %d", k.rank, peer)
	}
	p.mu.Lock()
	delay := p.delay
	p.mu.Unlock()
	if delay > 0 {
		if err := k.wait(ctx, nil, time.After(delay)); err != nil && !errors.Is(err, errMemDeadline) {
			return err
		}
	}
	return k.move(ctx, p, b, true)
}

// Recv implements Link.
func (k *memLink) Recv(ctx context.Context, peer int, b []byte) error {
	p, ok := k.in[peer]
	if !ok {
		return fmt.Errorf("collective: rank %d has no link to receive from rank %d", k.rank, peer)
	}
	return k.move(ctx, p, b, false)
}

// move writes b to p or fills b from p, waiting for room or data; the
// timeout restarts whenever bytes move.
func (k *memLink) move(ctx context.Context, p *memPipe, b []byte, write bool) error {
	var timer *time.Timer
	for len(b) > 0 {
		select {
		case <-k.intr:
			return errInterrupted
		default:
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.mu.Lock()
		if p.broken != nil {
			err := p.broken
			p.mu.Unlock()
			return err
		}
		var moved int
		switch {
		case write && p.drop:
			moved = len(b)
		case write:
			moved = p.write(b)
		default:
			moved = p.read(b)
		}
		if moved > 0 {
			p.signal()
		}
		changed := p.changed
		p.mu.Unlock()
		b = b[moved:]
		if len(b) == 0 {
			break
		}
		if moved > 0 || timer == nil {
			if timer == nil {
				timer = time.NewTimer(k.timeout)
				defer timer.Stop()
			} else {
				timer.Reset(k.timeout)
			}
		}
		if err := k.wait(ctx, changed, timer.C); err != nil {
			return err
		}
	}
	return nil
}

// wait blocks until changed is closed (nil: never), the timer fires (an
// error wrapping os.ErrDeadlineExceeded), ctx is done or the link is
// interrupted.
func (k *memLink) wait(ctx context.Context, changed <-chan struct{}, timer <-chan time.Time) error {
	select {
	case <-changed:
		return nil
	case <-timer:
		return errMemDeadline
	case <-ctx.Done():
		return ctx.Err()
	case <-k.intr:
		return errInterrupted
	}
}

// Interrupt implements Link.
func (k *memLink) Interrupt() {
	k.intrOnce.Do(func() { close(k.intr) })
}

// Close implements Link: every direction this rank is on breaks, as a
// closed or killed process's sockets do.
func (k *memLink) Close() error {
	k.closeOnce.Do(func() {
		k.Interrupt()
		for peer, p := range k.out {
			p.breakWith(fmt.Errorf("rank %d closed its link to rank %d: %w", k.rank, peer, io.ErrUnexpectedEOF))
		}
		for peer, p := range k.in {
			p.breakWith(fmt.Errorf("rank %d closed its link from rank %d: %w", k.rank, peer, io.ErrUnexpectedEOF))
		}
	})
	return nil
}
