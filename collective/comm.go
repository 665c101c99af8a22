package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/timeline"
)

// Comm is one rank's handle on a communicator: a fixed group of processes
// that run collective operations together. Every rank must issue the same
// operations, with the same lengths and roots, in the same order; a
// mismatch is detected and reported as ErrMismatch.
//
// Operations on one Comm are serialised; Close may be called concurrently
// with an operation and aborts it. After an operation fails, the Comm is
// broken: every later operation returns the same error, since the ranks can
// no longer agree on where their data streams stand.
type Comm struct {
	cfg         Config // as joined, for Rejoin
	rank, world int
	left, right int
	peers       []string
	chunk       int
	small       int          // largest allreduce in bytes run by the tree; <0: none
	smallAuto   bool         // small is DefaultSmallBytes: the cost model chooses (choose.go)
	treeLinked  bool         // t links this rank to its tree parent and children
	hier        *hierarchy   // where this rank sits among hosts (hier.go); nil: flat
	host        *hostGroup   // the group's host segment (host.go); nil: none
	t           Transport    // nil when world == 1
	ln          net.Listener // closed by Close when world == 1
	log         *slog.Logger

	mu       sync.Mutex // serialises operations; guards seq, scratch and exchange
	seq      uint64
	scratch  []byte
	exchange []byte // the tree's send and receive buffers

	busy      atomic.Bool
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	watch     *linkWatch // nil when links are not watched
}

// New joins the communicator described by cfg: it joins the job's peer
// mesh and links this rank to its ring neighbours and its binomial-tree
// parent and children (select.go) over cfg.Link (TCP by
// default), waiting up to cfg.ConnectTimeout for them to
// start. New owns cfg.Listener from the start and closes it on error.
func New(ctx context.Context, cfg Config) (*Comm, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	log := cfg.Logger.With("component", "collective", "rank", cfg.Rank)
	if cfg.WorldSize == 1 {
		c := newComm(cfg, nil, log)
		c.ln = cfg.Listener
		return c, nil
	}
	left, right := ringNeighbours(cfg.Rank, cfg.WorldSize)
	peers := linkedPeers(cfg.Rank, cfg.WorldSize)
	var hr *hierarchy
	if cfg.RanksPerHost != 0 {
		if hr = newHierarchy(cfg.Rank, hostsOf(cfg.Peers, cfg.WorldSize, cfg.RanksPerHost)); hr != nil {
			peers = append(peers, hr.peers()...)
			slices.Sort(peers)
			peers = slices.Compact(peers)
		}
	}
	t, err := connect(ctx, cfg, log, peers, peers)
	if err != nil {
		return nil, fmt.Errorf("collective: connect rank %d of %d: %w", cfg.Rank, cfg.WorldSize, err)
	}
	log.Debug("communicator ready", "world_size", cfg.WorldSize, "left", left, "right", right, "partners", len(peers))
	c := newComm(cfg, t, log)
	c.treeLinked = true
	c.hier = hr
	if hostEligible(cfg) {
		if err := c.joinHost(ctx, t.mesh); err != nil {
			t.Close()
			return nil, fmt.Errorf("collective: rank %d of %d: %w", cfg.Rank, cfg.WorldSize, err)
		}
	}
	c.startLinkWatch(cfg)
	return c, nil
}

// NewWithTransport builds a communicator over an already-connected
// Transport, which must link every rank to its ring neighbours; every
// allreduce runs the ring, whatever Config.SmallBytes says. Only
// cfg.Rank, cfg.WorldSize, cfg.Peers (for error messages), cfg.ChunkBytes
// and cfg.Logger are used. The Comm owns t and closes it.
func NewWithTransport(cfg Config, t Transport) (*Comm, error) {
	cfg = cfg.withDefaults()
	if cfg.WorldSize < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize {
		return nil, fmt.Errorf("collective: rank %d of world size %d: out of range", cfg.Rank, cfg.WorldSize)
	}
	if cfg.ChunkBytes < 0 {
		return nil, fmt.Errorf("collective: chunk size %d bytes: must be positive", cfg.ChunkBytes)
	}
	if t == nil && cfg.WorldSize > 1 {
		return nil, fmt.Errorf("collective: nil transport for world size %d", cfg.WorldSize)
	}
	return newComm(cfg, t, cfg.Logger.With("component", "collective", "rank", cfg.Rank)), nil
}

func newComm(cfg Config, t Transport, log *slog.Logger) *Comm {
	left, right := ringNeighbours(cfg.Rank, cfg.WorldSize)
	// Backed by uint64 so that float64 views of it are aligned, and a
	// whole number of elements of any type.
	words := min(max(cfg.ChunkBytes, 8), reducePiece) / 8
	scratch := make([]uint64, words)
	return &Comm{
		cfg:       cfg,
		rank:      cfg.Rank,
		world:     cfg.WorldSize,
		left:      left,
		right:     right,
		peers:     cfg.Peers,
		chunk:     cfg.ChunkBytes,
		small:     smallBytesOf(cfg),
		smallAuto: cfg.SmallBytes == 0,
		t:         t,
		log:       log,
		scratch:   asBytes(scratch),
	}
}

// reducePiece bounds the scratch buffer that received data is reduced
// from: about a core's L2 cache.
const reducePiece = 256 << 10

func ringNeighbours(rank, world int) (left, right int) {
	return (rank - 1 + world) % world, (rank + 1) % world
}

// Rank returns this process's rank.
func (c *Comm) Rank() int { return c.rank }

// WorldSize returns the number of ranks.
func (c *Comm) WorldSize() int { return c.world }

// Incarnations returns which incarnation of each rank this communicator
// connects (Config.Incarnations), in rank order: a survivor that lost a
// rank waits for a membership naming that rank's next one to Rejoin.
func (c *Comm) Incarnations() []uint32 {
	out := make([]uint32, c.world)
	copy(out, c.cfg.Incarnations)
	return out
}

// Close releases the communicator's connections and listener. If an
// operation is in flight it fails, and the other ranks are told that this
// rank gave up, so they fail too instead of waiting for the timeout.
func (c *Comm) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.watch.close()
		if c.t != nil {
			if c.busy.Load() {
				c.t.Abort(ErrClosed)
			}
			c.closeErr = c.t.Close()
		}
		if c.ln != nil {
			if err := c.ln.Close(); err != nil && c.closeErr == nil {
				c.closeErr = err
			}
		}
		// The operation in flight, if any, has been interrupted: once it
		// returns nothing reads the segment.
		c.mu.Lock()
		c.closeHost()
		c.mu.Unlock()
	})
	return c.closeErr
}

// Operation codes in the per-operation header.
const (
	opAllReduce = 1 + iota
	opBroadcast
	opAllGather
	opBarrier
)

var opNames = map[uint8]string{
	opAllReduce: "allreduce",
	opBroadcast: "broadcast",
	opAllGather: "allgather",
	opBarrier:   "barrier",
}

// header opens every operation on every link. The receiver compares it
// with its own, which catches ranks whose sequences of calls diverged
// before any data is misread.
type header struct {
	op       uint8
	elemSize uint8
	reduce   uint8
	root     uint32
	count    uint64
	seq      uint64
	elem     string // element type, for messages; not sent
}

const headerLen = 24

func (h header) encode() []byte {
	b := make([]byte, headerLen)
	h.put(b)
	return b
}

// put writes h's wire form into b[:headerLen].
func (h header) put(b []byte) {
	b[0] = h.op
	b[1] = h.elemSize
	b[2] = h.reduce
	b[3] = 0
	binary.LittleEndian.PutUint32(b[4:], h.root)
	binary.LittleEndian.PutUint64(b[8:], h.count)
	binary.LittleEndian.PutUint64(b[16:], h.seq)
}

func decodeHeader(b []byte) header {
	return header{
		op:       b[0],
		elemSize: b[1],
		reduce:   b[2],
		root:     binary.LittleEndian.Uint32(b[4:]),
		count:    binary.LittleEndian.Uint64(b[8:]),
		seq:      binary.LittleEndian.Uint64(b[16:]),
	}
}

// String describes the call, for error messages.
func (h header) String() string {
	name, ok := opNames[h.op]
	if !ok {
		name = fmt.Sprintf("operation %d", h.op)
	}
	elem := h.elem
	if elem == "" {
		elem = fmt.Sprintf("%d-byte elements", h.elemSize)
	}
	s := fmt.Sprintf("%s #%d", name, h.seq)
	switch h.op {
	case opAllReduce:
		s += fmt.Sprintf(" (%s) of %d %s", Op(h.reduce), h.count, elem)
	case opBroadcast:
		s += fmt.Sprintf(" of %d %s from rank %d", h.count, elem, h.root)
	case opAllGather:
		s += fmt.Sprintf(" of %d %s per rank", h.count, elem)
	}
	return s
}

// sameCall reports whether two headers describe the same call.
func sameCall(a, b header) bool {
	a.elem, b.elem = "", ""
	return a == b
}

// plan is one operation as two ordered lists of chunks: what this rank
// sends to its right neighbour and what it receives from its left one.
// Sends run on a helper goroutine, receives on the caller's, so the two
// directions overlap.
//
// Two orderings connect the lists. A gated send waits for one token, and
// a receive with token set yields one after it completes: that orders a
// chunk's send after the receive that produced it, which is what pipelines
// the ring. And a receive that overwrites a chunk this rank sent earlier in
// the operation waits until that send has returned (after counts sends),
// so the overwrite never races the send, whatever the transport.
type plan struct {
	sends []sendItem
	recvs []recvItem
	// combine reduces src into dst; final marks the last reduction of an
	// element.
	combine func(dst, src []byte, final bool)
	// lastSend maps a chunk (by buffer and offset) to 1 + the index of the
	// latest send of it planned so far.
	lastSend map[chunkKey]int
}

type chunkKey struct {
	buf *byte
	lo  int
}

type sendItem struct {
	buf   []byte
	gated bool
}

type recvItem struct {
	buf    []byte
	reduce bool // receive into scratch, then combine into buf
	final  bool
	token  bool
	after  int // sends that must have returned before buf is written
}

// send appends a send of buf[lo:hi].
func (p *plan) send(buf []byte, lo, hi int, gated bool) {
	p.sends = append(p.sends, sendItem{buf: buf[lo:hi], gated: gated})
	if p.lastSend == nil {
		p.lastSend = make(map[chunkKey]int)
	}
	p.lastSend[chunkKey{unsafe.SliceData(buf), lo}] = len(p.sends)
}

// recv appends a receive into buf[lo:hi]. Chunks of one buffer are cut
// the same way for sends and receives, so equal offsets mean equal chunks.
func (p *plan) recv(buf []byte, lo, hi int, it recvItem) {
	it.buf = buf[lo:hi]
	it.after = p.lastSend[chunkKey{unsafe.SliceData(buf), lo}]
	p.recvs = append(p.recvs, it)
}

// run executes one operation: it serialises it with others on c, checks
// for Close and cancellation, and runs p (built by build) with header h.
func (c *Comm) run(ctx context.Context, h header, build func(*plan)) error {
	return c.do(ctx, h, func(h header) error {
		var p plan
		build(&p)
		if c.world == 1 {
			// Nothing to exchange; build has done the local part (allgather's
			// copy of this rank's block).
			return nil
		}
		return c.exec(ctx, h, &p)
	})
}

// do runs one operation: it serialises it with others on c, checks for
// Close and cancellation, numbers it, and calls fn with the numbered
// header, wrapping fn's error with what was being done.
func (c *Comm) do(ctx context.Context, h header, fn func(h header) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy.Store(true)
	defer c.busy.Store(false)
	h.seq = c.seq
	if c.closed.Load() {
		return fmt.Errorf("collective: %s on rank %d: %w", h, c.rank, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("collective: %s on rank %d: %w", h, c.rank, err)
	}
	c.seq++
	if c.host != nil {
		c.host.post(h)
	}
	defer timeline.Start(timeline.CatCollective, opNames[h.op])()
	if err := fn(h); err != nil {
		return fmt.Errorf("collective: %s on rank %d: %w", h, c.rank, err)
	}
	return nil
}

func (c *Comm) exec(ctx context.Context, h header, p *plan) error {
	gated := 0
	for _, s := range p.sends {
		if s.gated {
			gated++
		}
	}
	tokens := make(chan struct{}, gated)
	sent := make(chan struct{}, len(p.sends))
	quit := make(chan struct{})
	sendDone := make(chan struct{})
	var g errgroup.Group
	g.Go(func() error {
		defer close(sendDone)
		if err := c.t.Send(ctx, c.right, h.encode()); err != nil {
			return err
		}
		for _, s := range p.sends {
			if s.gated {
				select {
				case <-tokens:
				case <-quit:
					return nil
				}
			}
			if err := c.t.Send(ctx, c.right, s.buf); err != nil {
				return err
			}
			sent <- struct{}{}
		}
		return nil
	})
	rerr := c.receive(ctx, h, p, tokens, sent, sendDone)
	if rerr != nil {
		close(quit)
	}
	serr := g.Wait()
	if rerr != nil && rerr != errSenderStopped {
		return rerr
	}
	return serr
}

// errSenderStopped tells exec that the receiver stopped because the sender
// failed; the sender's error is the one to report.
var errSenderStopped = errors.New("sender stopped")

func (c *Comm) receive(ctx context.Context, h header, p *plan, tokens chan<- struct{}, sent, sendDone <-chan struct{}) error {
	hb := make([]byte, headerLen)
	if err := c.t.Recv(ctx, c.left, hb); err != nil {
		return err
	}
	if err := c.checkHeader(h, hb, c.left); err != nil {
		return err
	}
	acked := 0
	for _, it := range p.recvs {
		for acked < it.after {
			select {
			case <-sent:
				acked++
			case <-sendDone:
				select {
				case <-sent:
					acked++
				default:
					return errSenderStopped
				}
			}
		}
		if it.reduce {
			if err := c.recvReduce(ctx, h, p, it); err != nil {
				return err
			}
		} else if err := c.t.Recv(ctx, c.left, it.buf); err != nil {
			return err
		}
		if it.token {
			tokens <- struct{}{}
		}
	}
	return nil
}

// recvReduce receives one chunk from the left neighbour and reduces it
// into it.buf: where it lies when the link can hand it over in place (a
// shared-memory ring), else in pieces the size of the scratch buffer,
// which is small enough to stay in cache between the kernel's copy into
// it and the reduction reading it.
func (c *Comm) recvReduce(ctx context.Context, h header, p *plan, it recvItem) error {
	if ip, ok := c.t.(inPlaceReceiver); ok {
		off := 0
		done, err := ip.RecvInPlace(ctx, c.left, len(it.buf), int(h.elemSize), c.scratch, func(b []byte) {
			p.combine(it.buf[off:off+len(b)], b, it.final)
			off += len(b)
		})
		if done || err != nil {
			return err
		}
	}
	for lo := 0; lo < len(it.buf); lo += len(c.scratch) {
		dst := it.buf[lo:min(lo+len(c.scratch), len(it.buf))]
		tmp := c.scratch[:len(dst)]
		if err := c.t.Recv(ctx, c.left, tmp); err != nil {
			return err
		}
		p.combine(dst, tmp, it.final)
	}
	return nil
}

// checkHeader compares the header hb received from rank from with this
// rank's own h; on a mismatch it aborts the communicator, blaming from.
func (c *Comm) checkHeader(h header, hb []byte, from int) error {
	theirs := decodeHeader(hb)
	if sameCall(h, theirs) {
		return nil
	}
	theirs.elem = fmt.Sprintf("%d-byte elements", theirs.elemSize)
	if theirs.elemSize == h.elemSize {
		theirs.elem = h.elem
	}
	err := &PeerError{Rank: from, Addr: c.peerAddr(from), Err: fmt.Errorf("%w: rank %d called %s, but rank %d called %s",
		ErrMismatch, from, theirs, c.rank, h)}
	c.t.Abort(err)
	return err
}

func (c *Comm) peerAddr(rank int) string {
	if rank < len(c.peers) {
		return c.peers[rank]
	}
	return ""
}

// chunks calls fn for consecutive pieces of [lo, hi) of at most size
// bytes; size is a multiple of the element size.
func chunks(lo, hi, size int, fn func(lo, hi int)) {
	for lo < hi {
		end := min(lo+size, hi)
		fn(lo, end)
		lo = end
	}
}

// chunkSize returns the pipelining unit in bytes for elements of esize
// bytes: c.chunk rounded down to whole elements, at least one element.
func (c *Comm) chunkSize(esize int) int {
	return max(c.chunk/esize, 1) * esize
}

// segment returns the byte range of block k when count elements of esize
// bytes are split into n blocks whose lengths differ by at most one.
func segment(k, n, count, esize int) (lo, hi int) {
	base, rem := count/n, count%n
	start := k*base + min(k, rem)
	length := base
	if k < rem {
		length++
	}
	return start * esize, (start + length) * esize
}

func mod(a, n int) int { return ((a % n) + n) % n }
