package collective

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"
)

// The host segment: small allreduces and barriers of a group whose ranks
// all run on one host. Point to point, any allreduce of n ranks sends at
// least 2(n-1) messages, and with more ranks than cores nearly every one
// of them finds its receiver asleep: a doorbell write, a wake-up and a
// read. Here every rank writes its vector into its own slot of one shared
// segment and counts itself in; the last to arrive reduces every slot,
// publishes the result and wakes every sleeper with one futex wake. That
// is n arrivals and one system call for the whole group, as intra-node
// collectives (Open MPI's shared-memory components, NCCL's one-host
// paths) do for small messages.
//
// The segment (host_setup.go) is zero at first. Its control page holds:
//
//	gen      the number of completed operations (the futex word)
//	waiters  ranks asleep on gen, so that the last arriver calls
//	         FUTEX_WAKE only when someone sleeps
//	arrivals ranks counted in, over all operations: the arrival that
//	         makes it a multiple of n is the last of its operation
//	status   set by a last arriver that found the calls mismatched
//	attached ranks that mapped the segment; the n-th removes its file
//	complete the rank that arrived last, blamed if it never completes
//
// then a header per rank (the operation it is in: every operation posts
// one, ring ones too, so that a rank in another operation is named), the
// result, and a data slot per rank.
//
// A rank writes its slot and header only before it counts itself in, and
// the next time only after gen moved on, which every rank's slot must
// have been reduced for; the result is written by the last arriver only,
// after every rank has copied the previous one out (they counted
// themselves into this operation). Sleepers and the waker use the
// Dekker handshake of the doorbell (link_shm_ring.go): a sleeper counts
// itself in waiters and then checks gen; the waker moves gen and then
// checks waiters; FUTEX_WAIT itself sleeps only while gen holds the value
// the sleeper saw.

// Offsets in the control page; each word on a cache line of its own.
const (
	hostOffGen      = 0
	hostOffWaiters  = 64
	hostOffArrivals = 128
	hostOffStatus   = 192
	hostOffAttached = 256
	hostOffComplete = 320
	hostCtlBytes    = 4096
	hostHeaderBytes = 64
)

// hostMaxBytes is the largest allreduce, in bytes per rank, that runs on
// the host segment: the size of each rank's slot. The last arriver reduces
// n slots alone, so the segment's advantage shrinks as vectors grow
// (docs/benchmarks.md).
const hostMaxBytes = 16 << 10

// Waiting for the last arriver: first hostSpins polls of gen, yielding the
// processor each time (for at most hostSpinTime), then sleeps for slices
// starting at hostSliceMin and doubling up to hostSliceMax, between which
// it looks for a failed mesh, a mismatched call and a missing rank.
// Variables for tests.
var (
	hostSpins    = 64
	hostSpinTime = 50 * time.Microsecond
	hostSliceMin = time.Millisecond
	hostSliceMax = 100 * time.Millisecond
)

// hostGroup is one rank's view of the host segment.
type hostGroup struct {
	mem   []byte
	rank  int
	world int
	kids  [][]int // every rank's children in the binomial tree
	mesh  *Mesh
	// local is set when every rank of the group runs in this process:
	// they wait on a channel instead of the futex (host_wait.go).
	local *hostLocal
	path  string // the segment's file, removed once every rank mapped it
}

// failure returns the mesh's failure once it is settled: the error every
// rank shares.
func (g *hostGroup) failure() error {
	<-g.mesh.Done()
	return g.mesh.Err()
}

func (g *hostGroup) word32(off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&g.mem[off]))
}

func (g *hostGroup) word64(off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&g.mem[off]))
}

func (g *hostGroup) gen() *uint32 { return g.word32(hostOffGen) }

// headerWords returns rank r's posted header: the call's fields, its
// count, and its sequence number plus one (zero: nothing posted).
func (g *hostGroup) headerWords(r int) (fields, count, seq *uint64) {
	off := hostCtlBytes + r*hostHeaderBytes
	return g.word64(off), g.word64(off + 8), g.word64(off + 16)
}

// arrivedWord returns the word where rank r records the sequence number
// plus one of the last segment operation it counted itself into: a rank
// that posted a call but failed before arriving is still missing.
func (g *hostGroup) arrivedWord(r int) *uint64 {
	return g.word64(hostCtlBytes + r*hostHeaderBytes + 24)
}

// resultOff is where the result starts: after the headers, on a page.
func (g *hostGroup) resultOff() int {
	return hostCtlBytes + roundUp(g.world*hostHeaderBytes, hostCtlBytes)
}

func (g *hostGroup) result(n int) []byte {
	off := g.resultOff()
	return g.mem[off : off+n : off+n]
}

func (g *hostGroup) slot(r, n int) []byte {
	off := g.resultOff() + (1+r)*hostMaxBytes
	return g.mem[off : off+n : off+n]
}

// hostSegmentBytes is the size of the segment of a world of n ranks.
func hostSegmentBytes(n int) int {
	return hostCtlBytes + roundUp(n*hostHeaderBytes, hostCtlBytes) + (n+1)*hostMaxBytes
}

func roundUp(x, to int) int { return (x + to - 1) / to * to }

// packHeader packs h's fields other than count and seq into one word.
func packHeader(h header) uint64 {
	return uint64(h.op) | uint64(h.elemSize)<<8 | uint64(h.reduce)<<16 | uint64(h.root)<<32
}

// post announces that this rank entered the call h.
func (g *hostGroup) post(h header) {
	fields, count, seq := g.headerWords(g.rank)
	atomic.StoreUint64(fields, packHeader(h))
	atomic.StoreUint64(count, h.count)
	atomic.StoreUint64(seq, h.seq+1)
}

// posted returns the call rank r last posted, and whether it posted one.
func (g *hostGroup) posted(r int) (header, bool) {
	fields, count, seq := g.headerWords(r)
	s := atomic.LoadUint64(seq)
	if s == 0 {
		return header{}, false
	}
	f := atomic.LoadUint64(fields)
	return header{
		op:       uint8(f),
		elemSize: uint8(f >> 8),
		reduce:   uint8(f >> 16),
		root:     uint32(f >> 32),
		count:    atomic.LoadUint64(count),
		seq:      s - 1,
	}, true
}

// hostAllReduce runs an allreduce (or, with no data, a barrier) of the
// call h on the host segment; combine is as for the tree, whose order of
// reduction it keeps, so that both give the same bits. Called with c.mu
// held, after do posted h.
func (c *Comm) hostAllReduce(ctx context.Context, h header, data []byte, combine func(dst, src []byte, final bool)) error {
	g := c.host
	if g.mesh.isFailed() {
		return g.failure()
	}
	g0 := atomic.LoadUint32(g.gen())
	var wake chan struct{}
	if g.local != nil {
		wake = *g.local.wake.Load()
	}
	copy(g.slot(g.rank, len(data)), data)
	atomic.StoreUint64(g.arrivedWord(g.rank), h.seq+1)
	if atomic.AddUint64(g.word64(hostOffArrivals), 1)%uint64(g.world) == 0 {
		atomic.StoreUint32(g.word32(hostOffComplete), uint32(g.rank))
		g.complete(h, len(data), combine)
	} else if err := c.hostWait(ctx, h, g0, wake); err != nil {
		return err
	}
	if atomic.LoadUint32(g.word32(hostOffStatus)) != 0 {
		return c.hostMismatch(h)
	}
	copy(data, g.result(len(data)))
	return nil
}

// complete is the last arriver's part: it checks every rank's call,
// reduces the slots in the binomial tree's order (the rank's own vector,
// then each child's partial result, smallest subtree first), publishes
// the result and wakes the others.
func (g *hostGroup) complete(h header, n int, combine func(dst, src []byte, final bool)) {
	ok := true
	for r := range g.world {
		if theirs, _ := g.posted(r); !sameCall(h, theirs) {
			ok = false
			break
		}
	}
	if !ok {
		atomic.StoreUint32(g.word32(hostOffStatus), 1)
	} else if n > 0 {
		for r := g.world - 1; r >= 0; r-- {
			for i, kid := range g.kids[r] {
				combine(g.slot(r, n), g.slot(kid, n), r == 0 && i == len(g.kids[r])-1)
			}
		}
		copy(g.result(n), g.slot(0, n))
	}
	atomic.AddUint32(g.gen(), 1)
	if g.local != nil {
		next := make(chan struct{})
		close(*g.local.wake.Swap(&next))
	} else if atomic.LoadUint32(g.word32(hostOffWaiters)) > 0 {
		futexWake(g.gen())
	}
}

// otherCall returns a rank that posted a call other than h at h's place
// in the sequence, or -1. A rank that has not posted h's call yet shows
// an earlier sequence number.
func (g *hostGroup) otherCall(h header) int {
	for r := range g.world {
		if theirs, ok := g.posted(r); ok && theirs.seq == h.seq && !sameCall(h, theirs) {
			return r
		}
	}
	return -1
}

// hostMismatch fails the communicator for a mismatched call: it names a
// rank whose call differs from this rank's h, as checkHeader does.
func (c *Comm) hostMismatch(h header) error {
	from := c.host.otherCall(h)
	if from < 0 {
		// The last arriver saw a call that is no longer posted: not
		// reached, since no rank moves on after a mismatch.
		err := &PeerError{Rank: c.rank, Addr: c.peerAddr(c.rank), Err: fmt.Errorf("%w: ranks' calls differ at %s", ErrMismatch, h)}
		c.t.Abort(err)
		return err
	}
	theirs, _ := c.host.posted(from)
	return c.checkHeader(h, theirs.encode(), from)
}

// missing returns the ranks that have not arrived in the call h, in
// order, or -1 alone when every rank has.
func (g *hostGroup) missing(h header) []int {
	var out []int
	for r := range g.world {
		if atomic.LoadUint64(g.arrivedWord(r)) < h.seq+1 {
			out = append(out, r)
		}
	}
	if out == nil {
		return []int{-1}
	}
	return out
}

// hostTimeout fails the communicator because no rank arrived for the
// collective timeout, blaming the ranks that have not entered h.
func (c *Comm) hostTimeout(h header) error {
	missing := c.host.missing(h)
	culprit := missing[0]
	why := fmt.Errorf("%w: rank(s) %v did not enter %s within %v", ErrPeerTimeout, missing, h, c.cfg.Timeout)
	if culprit < 0 {
		// Every rank arrived, and the last one never completed: it died
		// or stopped while reducing.
		culprit = int(atomic.LoadUint32(c.host.word32(hostOffComplete)))
		why = fmt.Errorf("%w: rank %d arrived last in %s and did not complete it within %v", ErrPeerTimeout, culprit, h, c.cfg.Timeout)
	}
	err := &PeerError{Rank: culprit, Addr: c.peerAddr(culprit), Err: why}
	c.host.mesh.fail(err, culprit, true)
	return c.host.failure()
}
