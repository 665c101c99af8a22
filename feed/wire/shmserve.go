package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"golang.org/x/sys/unix"

	"github.com/spindle-ml/spindle/feed"
)

// serveShm sends one epoch through the server's shared-memory region
// (see shm.go), the stream written by send; without a region (no memfd)
// every message goes inline, which the client reads the same way. Once
// the stream has ended, however it ended, the connection stays open for
// reading: the client frees its last messages after that, and the shm
// streams close the connection when the client does. kept is then true,
// and the caller closes only the writing side (a stream that failed ends
// without its end frame, which the client takes for a cut).
func (s *Server) serveShm(ctx context.Context, conn *net.UnixConn, send func(*shmWriter) error) (kept bool, err error) {
	w := &shmWriter{ctx: ctx, conn: conn, sock: &s.bytes, stream: &s.shmBytes, inline: &s.shmInline, inPlace: &s.shmInPlace, waitedOut: &s.shmWaitedOut,
		holds: &s.shmHolds}
	if w.region = s.shm.regionFor(); w.region != nil {
		w.share = s.shm.track(conn)
		if err := w.sendRegion(); err != nil {
			return true, err
		}
	}
	return w.region != nil, send(w)
}

// sendBatches sends r's batches, each by send, flushing whenever r has
// none ready; a failure of r is flushed first, so that what was sent
// stays good, and returned (no end frame follows: the client sees the
// stream cut).
func (s *Server) sendBatches(ctx context.Context, w *shmWriter, r feed.Reader, send func(arrow.RecordBatch) error) error {
	ready, _ := r.(bufferedReader)
	if h, ok := r.(heldEnd); ok && w.share != nil {
		h.AskAfterTaken(w.awaitTaken)
	}
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			_ = w.flush()
			return fmt.Errorf("read batch: %w", err)
		}
		rows := rec.NumRows()
		err = send(rec) // copies the batch into the region, or holds it there
		rec.Release()
		if err != nil {
			return err
		}
		if ready == nil || ready.Buffered() == 0 {
			if err := w.flush(); err != nil {
				return err
			}
		}
		s.rows.Add(rows)
		s.batches.Add(1)
		s.taken.sent(s.bytes.Load()+int64(len(w.frames)), rows)
	}
}

// serveArrowShm sends one epoch as an arrow-mode stream through shared
// memory: each IPC message of the stream is one message of the region.
func (s *Server) serveArrowShm(ctx context.Context, conn *net.UnixConn, epoch int, r feed.Reader) (bool, error) {
	return s.serveShm(ctx, conn, func(w *shmWriter) error {
		iw := ipc.NewWriterWithPayloadWriter(w, ipc.WithSchema(withEpoch(s.cfg.Source.Schema(), epoch)), ipc.WithAllocator(goAllocator))
		if r != nil {
			err := s.sendBatches(ctx, w, r, func(rec arrow.RecordBatch) error {
				w.batch = rec
				defer func() { w.batch = nil }()
				return iw.Write(rec)
			})
			if err != nil {
				return err
			}
		}
		return iw.Close()
	})
}

// serveTensorShm sends one epoch as a tensor-mode stream through shared
// memory: the stream header is one message, each batch frame (row count,
// features, labels) another, converted straight into the region; the end
// frame ends the epoch (there is no zero row count).
func (s *Server) serveTensorShm(ctx context.Context, conn *net.UnixConn, epoch int, r feed.Reader) (bool, error) {
	return s.serveShm(ctx, conn, func(w *shmWriter) error {
		h := s.tensor.header(epoch)
		if err := w.put(int64(len(h)), func(dst []byte) error { copy(dst, h); return nil }); err != nil {
			return err
		}
		if r != nil {
			err := s.sendBatches(ctx, w, r, func(rec arrow.RecordBatch) error {
				if rec.NumRows() == 0 {
					return nil
				}
				return w.put(4*int64(s.tensor.frameWords(int(rec.NumRows()))), func(dst []byte) error {
					_, out, err := s.tensor.encode(rec, bytesF32(dst)[:0])
					if err == nil && unsafe.SliceData(out) != unsafe.SliceData(dst) {
						err = errors.New("tensor feed: the batch was not converted in place")
					}
					return err
				})
			})
			if err != nil {
				return err
			}
		}
		return w.Close()
	})
}

// shmStreams is a server's shared memory: one region that every
// connection's stream uses in turn (its pages, once written, need no
// fault in later epochs), and the connections whose clients may still
// free messages in it.
type shmStreams struct {
	size     int64
	holdWait time.Duration // the region's, when set (tests)
	log      *slog.Logger

	region   *shmRegion // made on first use, by Run's goroutine
	tried    bool       // making it was tried; nil region: it failed
	borrowed bool       // region is a SharedRegion: not ours to close

	mu    sync.Mutex
	conns map[*net.UnixConn]struct{}
	wg    sync.WaitGroup
}

// regionFor returns the region, making it the first time; nil when shared
// memory is not to be had here.
func (m *shmStreams) regionFor() *shmRegion {
	if !m.tried {
		m.tried = true
		var err error
		if m.region, err = newShmRegion(m.size, 0); err != nil {
			m.log.Warn("no shared memory for the feed; sending batches over the socket", "err", err)
		} else if m.holdWait > 0 {
			m.region.holdWait = m.holdWait
		}
	}
	return m.region
}

// shmShare is one connection's share of the region: the messages sent on
// it that its client has not freed. Its client can free only those, and
// once the connection is closed (the client closes it only after
// releasing every batch, or its process has ended) whatever is left is
// freed with it.
type shmShare struct {
	mu sync.Mutex
	// sent maps each message to the batch it points at where the batch
	// lies (writeInPlace), held until the client frees the message; nil
	// for messages copied into the region.
	sent map[uint64]arrow.RecordBatch
	// stop, once set, ends the stream being written: the client freed
	// something it was not given, or closed the epoch before its end.
	stop atomic.Pointer[error]

	// What the client said of held ends, under mu: heard once its first
	// word came (a client that answers 'H' frames says shmHello first),
	// and how many 'H' frames it answered. gone: the connection closed.
	heard, holds, gone bool
	atHold             uint64
	changed            chan struct{} // closed and replaced on every change
}

// heardLocked records a change and wakes the waiters; sh.mu is held.
func (sh *shmShare) heardLocked() {
	close(sh.changed)
	sh.changed = make(chan struct{})
}

// hear records one word of the client's about held ends.
func (sh *shmShare) hear(word uint64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.heard && word != shmHello && word != shmAtHold && word != shmAbandon {
		return // a free: only the first tells anything of held ends
	}
	switch word {
	case shmHello:
		sh.holds = true
	case shmAtHold:
		sh.atHold++
	}
	sh.heard = true
	sh.heardLocked()
}

// await waits until done holds of the share (under its lock), the
// connection closed, the stream stopped, or ctx ended.
func (sh *shmShare) await(ctx context.Context, done func() bool) error {
	for {
		if errp := sh.stop.Load(); errp != nil {
			return *errp
		}
		sh.mu.Lock()
		ok, gone, changed := done(), sh.gone, sh.changed
		sh.mu.Unlock()
		if ok {
			return nil
		}
		if gone {
			return &consumerError{errors.New("the training process closed the feed connection")}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// add records the message at off in region, which holds held (nil for
// a message copied into the region). Once the connection is gone, the
// message is freed at once.
func (sh *shmShare) add(region *shmRegion, off uint64, held arrow.RecordBatch) {
	sh.mu.Lock()
	gone := sh.sent == nil
	if !gone {
		sh.sent[off] = held
	}
	sh.mu.Unlock()
	if gone {
		_ = freeSent(region, off, held)
	}
}

// freeSent frees the message at off in region and releases the batch it
// held in place (nil for a copied message).
func freeSent(region *shmRegion, off uint64, held arrow.RecordBatch) error {
	if held != nil {
		defer held.Release()
	}
	return region.release(off)
}

// take removes off from the share, reporting whether it was there, and
// returns the batch it held (which the caller releases).
func (sh *shmShare) take(off uint64) (arrow.RecordBatch, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held, ok := sh.sent[off]
	delete(sh.sent, off)
	return held, ok
}

// errAbandoned is how a client's early Close reaches the writer: as a
// consumer that left mid-epoch.
var errAbandoned = errors.New("the training process closed the epoch before its end")

// shmAbandon is the free frame of a client that closes an epoch early.
const shmAbandon = ^uint64(0)

// track reads the frees conn's client sends until it closes conn (or
// close does), then frees what the client left and closes conn.
func (m *shmStreams) track(conn *net.UnixConn) *shmShare {
	sh := &shmShare{sent: map[uint64]arrow.RecordBatch{}, changed: make(chan struct{})}
	m.mu.Lock()
	if m.conns == nil {
		m.conns = map[*net.UnixConn]struct{}{}
	}
	m.conns[conn] = struct{}{}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		m.readFrees(conn, sh)
		m.mu.Lock()
		delete(m.conns, conn)
		m.mu.Unlock()
		_ = conn.Close()
		sh.mu.Lock()
		for off, held := range sh.sent {
			_ = freeSent(m.region, off, held)
		}
		sh.sent = nil
		sh.gone = true
		sh.heardLocked()
		sh.mu.Unlock()
	}()
	return sh
}

func (m *shmStreams) readFrees(conn *net.UnixConn, sh *shmShare) {
	br := bufio.NewReaderSize(conn, 4<<10)
	var b [shmFreeBytes]byte
	for {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return
		}
		off := binary.LittleEndian.Uint64(b[:])
		switch {
		case off == shmHello || off == shmAtHold:
			sh.hear(off)
		case off == shmAbandon:
			err := error(&consumerError{errAbandoned})
			sh.stop.CompareAndSwap(nil, &err)
			sh.hear(off) // wakes a writer waiting for an answer
		default:
			sh.hear(off)
			held, ok := sh.take(off)
			if !ok {
				err := error(&consumerError{fmt.Errorf("the training process freed feed memory at %d, which it was not given", off)})
				sh.stop.CompareAndSwap(nil, &err)
				return
			}
			if err := freeSent(m.region, off, held); err != nil {
				m.log.Warn("free feed memory", "err", err)
			}
		}
	}
}

// close closes the connections still open, waits for their readers and
// unmaps the region.
func (m *shmStreams) close() {
	m.mu.Lock()
	for c := range m.conns {
		_ = c.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
	if m.region != nil && !m.borrowed {
		if err := m.region.close(); err != nil {
			m.log.Warn("close the feed's shared memory", "err", err)
		}
		m.region = nil
	}
}

// shmWriter is the shared-memory stream's ipc.PayloadWriter: it copies
// each message into the region (or, when the client holds all of it,
// queues it inline) and queues its frame.
type shmWriter struct {
	ctx    context.Context
	conn   *net.UnixConn
	region *shmRegion // nil: every message inline
	sock   *atomic.Int64
	stream *atomic.Int64 // message bytes put in the region
	inline *atomic.Int64 // messages sent inline
	frames []byte

	share *shmShare // with region

	// heldOut is set when a wait for room ran out while the client held
	// the region; heldOutAt is the region's frees then. Until the client
	// frees something, later messages go inline without waiting.
	heldOut   bool
	heldOutAt uint64
	waitedOut *atomic.Int64 // waits for room that ran out

	// holdsSent counts the 'H' frames sent on the stream; holds, on
	// every stream.
	holdsSent uint64
	holds     *atomic.Int64

	// batch is the batch being written, in arrow mode; its record batch
	// message may point at it where it lies (writeInPlace).
	batch   arrow.RecordBatch
	inPlace *atomic.Int64 // batches sent where they lie
}

var _ ipc.PayloadWriter = (*shmWriter)(nil)

// sendRegion sends the region's frame with its memfd.
func (w *shmWriter) sendRegion() error {
	f := putFrame(nil, frameRegion, uint64(len(w.region.mem)), regionHolds)
	n, _, err := w.conn.WriteMsgUnix(f, unix.UnixRights(w.region.fd), nil)
	w.sock.Add(int64(n))
	if err != nil {
		return &consumerError{err}
	}
	return nil
}

func (w *shmWriter) Start() error { return nil }

func (w *shmWriter) WritePayload(p ipc.Payload) error {
	if err := w.stopped(); err != nil {
		return err
	}
	full := false
	if w.batch != nil && w.region != nil && w.region.msgEnd < int64(len(w.region.mem)) {
		var done bool
		var err error
		if done, full, err = w.writeInPlace(p); done || err != nil {
			return err
		}
	}
	var size countingDiscard
	if _, err := p.WritePayload(&size); err != nil {
		return err
	}
	fill := func(dst []byte) error {
		_, err := p.WritePayload(&sliceWriter{b: dst})
		return err
	}
	if full {
		// The region had no room for the batch however long it waited
		// (the client holds the rest, or the batch is over half of what
		// messages may hold): waiting again would be as long for nothing.
		return w.putInline(int64(size), fill)
	}
	return w.put(int64(size), fill)
}

// put queues a message of n bytes, which fill writes: into the region
// when there is room, else inline.
func (w *shmWriter) put(n int64, fill func(dst []byte) error) error {
	if err := w.stopped(); err != nil {
		return err
	}
	if w.region != nil {
		off, ok, err := w.reserve(n, n)
		if err != nil {
			return err
		}
		if ok {
			if err := fill(w.region.mem[off : off+uint64(n)]); err != nil {
				_ = w.region.release(off)
				return err
			}
			w.share.add(w.region, off, nil)
			w.frames = putFrame(w.frames, frameMessage, off, uint64(n))
			w.stream.Add(n)
			return nil
		}
	}
	return w.putInline(n, fill)
}

// reserve takes n bytes of the region's message space for a message that
// counts charge bytes against its budget: at once when there is room,
// else after letting the client read what is queued (so that it can free
// space) and waiting as shmRegion.alloc does; false when the message is
// to go inline.
func (w *shmWriter) reserve(n, charge int64) (uint64, bool, error) {
	if off, ok := w.region.tryAlloc(n, charge); ok {
		return off, true, nil
	}
	if w.region.tooBig(charge) {
		return 0, false, nil
	}
	if err := w.flush(); err != nil {
		return 0, false, err
	}
	if w.heldOut && w.region.frees.Load() == w.heldOutAt {
		// The client held the region the last time it was full and has
		// freed nothing since: waiting again would be as long for
		// nothing, once per message.
		return 0, false, nil
	}
	off, ok, err := w.region.alloc(w.ctx, n, charge, w.clientIdle, w.stopped)
	if err == nil && !ok {
		w.heldOut, w.heldOutAt = true, w.region.frees.Load()
		w.waitedOut.Add(1)
	}
	return off, ok, err
}

// heldEnd is a reader whose epoch's end waits for the driver
// (feed.HeldEpoch), which may first wait for its consumer.
type heldEnd interface {
	AskAfterTaken(taken func(ctx context.Context) error)
}

// awaitTaken returns once the client's process has asked for the message
// after the last one sent: it sends the frames queued and an 'H' frame,
// and waits for the client's answer. A client that does not answer 'H'
// frames (it did not say shmHello before its first free) is not waited
// for: its epochs end when the feed's rows run out, as before.
func (w *shmWriter) awaitTaken(ctx context.Context) error {
	if err := w.flush(); err != nil {
		return err
	}
	sh := w.share
	if err := sh.await(ctx, func() bool { return sh.heard }); err != nil {
		return err
	}
	sh.mu.Lock()
	holds := sh.holds
	sh.mu.Unlock()
	if !holds {
		return nil
	}
	w.holdsSent++
	n := w.holdsSent
	w.frames = putFrame(w.frames, frameHold, n, 0)
	if err := w.flush(); err != nil {
		return err
	}
	w.holds.Add(1)
	return sh.await(ctx, func() bool { return sh.atHold >= n })
}

// putInline queues a message of n bytes, which fill writes, inline.
func (w *shmWriter) putInline(n int64, fill func(dst []byte) error) error {
	msg := make([]byte, n) // aligned, as fill may want
	if err := fill(msg); err != nil {
		return err
	}
	w.frames = putFrame(w.frames, frameInline, uint64(n), 0)
	w.frames = append(w.frames, msg...)
	w.inline.Add(1)
	if len(w.frames) >= flushAbove {
		return w.flush()
	}
	return nil
}

// stopped returns why the client stopped the stream, if it did.
func (w *shmWriter) stopped() error {
	if w.share != nil {
		if errp := w.share.stop.Load(); errp != nil {
			return *errp
		}
	}
	return nil
}

// clientIdle reports whether the client has read every frame sent and
// every free it sent has been read: it then holds its messages and waits
// for the next. (Frees still queued mean a slow reader of frees, not a
// client that holds the region.)
func (w *shmWriter) clientIdle() bool {
	out, ok := outQueue(w.conn)
	if !ok || out != 0 {
		return false
	}
	in, ok := inQueue(w.conn)
	return ok && in == 0
}

// Close ends the stream.
func (w *shmWriter) Close() error {
	w.frames = putFrame(w.frames, frameEnd, 0, 0)
	return w.flush()
}

// flush writes the queued frames.
func (w *shmWriter) flush() error {
	if len(w.frames) == 0 {
		return nil
	}
	n, err := w.conn.Write(w.frames)
	w.sock.Add(int64(n))
	w.frames = w.frames[:0]
	if err != nil {
		return &consumerError{err}
	}
	return nil
}

// countingDiscard counts what is written to it.
type countingDiscard int64

func (c *countingDiscard) Write(p []byte) (int, error) {
	*c += countingDiscard(len(p))
	return len(p), nil
}

// sliceWriter writes into a slice of exactly the right size.
type sliceWriter struct {
	b   []byte
	off int
}

func (s *sliceWriter) Write(p []byte) (int, error) {
	if s.off+len(p) > len(s.b) {
		return 0, io.ErrShortWrite
	}
	s.off += copy(s.b[s.off:], p)
	return len(p), nil
}
