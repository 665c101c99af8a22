package wire

import (
	"bufio"
	"bytes"
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
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"

	"github.com/spindle-ml/spindle/feed"
)

// serveShm sends one epoch through the server's shared-memory region
// (see shm.go), the stream written by send; without a region (no memfd)
// every message goes inline, which the client reads the same way. Once
// the stream has ended, however it ended, the connection stays open for
// reading: the client frees its last messages after that, and the shm
// streams close the connection when the client does (kept is then true).
func (s *Server) serveShm(ctx context.Context, conn *net.UnixConn, send func(*shmWriter) error) (kept bool, err error) {
	w := &shmWriter{ctx: ctx, conn: conn, sock: &s.bytes, stream: &s.shmBytes, inline: &s.shmInline}
	if w.region = s.shm.regionFor(); w.region != nil {
		w.share = s.shm.track(conn)
		defer func() {
			// Only the writing side: a stream that failed ends without
			// its end frame, which the client takes for a cut, and the
			// client may still hold messages whose frees are to come.
			_ = conn.CloseWrite()
			kept = true
		}()
		if err := w.sendRegion(); err != nil {
			return false, err
		}
	}
	return false, send(w)
}

// sendBatches sends r's batches, each by send, flushing whenever r has
// none ready; a failure of r is flushed first, so that what was sent
// stays good, and returned (no end frame follows: the client sees the
// stream cut).
func (s *Server) sendBatches(ctx context.Context, w *shmWriter, r feed.Reader, send func(arrow.RecordBatch) error) error {
	ready, _ := r.(bufferedReader)
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
		err = send(rec) // copies the batch into the region
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
			if err := s.sendBatches(ctx, w, r, iw.Write); err != nil {
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
	size int64
	log  *slog.Logger

	region *shmRegion // made on first use, by Run's goroutine
	tried  bool       // making it was tried; nil region: it failed

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
		if m.region, err = newShmRegion(m.size); err != nil {
			m.log.Warn("no shared memory for the feed; sending batches over the socket", "err", err)
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
	mu   sync.Mutex
	sent map[uint64]struct{}
	// stop, once set, ends the stream being written: the client freed
	// something it was not given, or closed the epoch before its end.
	stop atomic.Pointer[error]
}

func (sh *shmShare) add(off uint64) {
	sh.mu.Lock()
	sh.sent[off] = struct{}{}
	sh.mu.Unlock()
}

// take removes off from the share, reporting whether it was there.
func (sh *shmShare) take(off uint64) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, ok := sh.sent[off]
	delete(sh.sent, off)
	return ok
}

// errAbandoned is how a client's early Close reaches the writer: as a
// consumer that left mid-epoch.
var errAbandoned = errors.New("the training process closed the epoch before its end")

// shmAbandon is the free frame of a client that closes an epoch early.
const shmAbandon = ^uint64(0)

// track reads the frees conn's client sends until it closes conn (or
// close does), then frees what the client left and closes conn.
func (m *shmStreams) track(conn *net.UnixConn) *shmShare {
	sh := &shmShare{sent: map[uint64]struct{}{}}
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
		for off := range sh.sent {
			_ = m.region.release(off)
		}
		sh.sent = nil
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
		case off == shmAbandon:
			err := error(&consumerError{errAbandoned})
			sh.stop.CompareAndSwap(nil, &err)
		case !sh.take(off):
			err := error(&consumerError{fmt.Errorf("the training process freed feed memory at %d, which it was not given", off)})
			sh.stop.CompareAndSwap(nil, &err)
			return
		default:
			if err := m.region.release(off); err != nil {
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
	if m.region != nil {
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
}

var _ ipc.PayloadWriter = (*shmWriter)(nil)

// sendRegion sends the region's frame with its memfd.
func (w *shmWriter) sendRegion() error {
	f := putFrame(nil, frameRegion, uint64(len(w.region.mem)), 0)
	n, _, err := w.conn.WriteMsgUnix(f, unix.UnixRights(w.region.fd), nil)
	w.sock.Add(int64(n))
	if err != nil {
		return &consumerError{err}
	}
	return nil
}

func (w *shmWriter) Start() error { return nil }

func (w *shmWriter) WritePayload(p ipc.Payload) error {
	var size countingDiscard
	if _, err := p.WritePayload(&size); err != nil {
		return err
	}
	return w.put(int64(size), func(dst []byte) error {
		_, err := p.WritePayload(&sliceWriter{b: dst})
		return err
	})
}

// put queues a message of n bytes, which fill writes: into the region
// when there is room, else inline.
func (w *shmWriter) put(n int64, fill func(dst []byte) error) error {
	if err := w.stopped(); err != nil {
		return err
	}
	if w.region != nil {
		off, ok := w.region.tryAlloc(n)
		if !ok {
			// Let the client read what is queued, so it can free space.
			if err := w.flush(); err != nil {
				return err
			}
			var err error
			if off, ok, err = w.region.alloc(w.ctx, n, w.clientIdle, w.stopped); err != nil {
				return err
			}
		}
		if ok {
			if err := fill(w.region.mem[off : off+uint64(n)]); err != nil {
				_ = w.region.release(off)
				return err
			}
			w.share.add(off)
			w.frames = putFrame(w.frames, frameMessage, off, uint64(n))
			w.stream.Add(n)
			return nil
		}
	}
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

// clientIdle reports whether the client has read every frame sent: it
// then holds its messages and waits for the next.
func (w *shmWriter) clientIdle() bool {
	q, ok := outQueue(w.conn)
	return ok && q == 0
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

// dialShm connects to the shared-memory socket beside socketPath.
// errNoShm means there is none (an executor without it, or with it
// turned off): the caller uses the plain socket.
func dialShm(ctx context.Context, socketPath string) (*conn, *shmMessages, error) {
	path := SharedMemoryPath(socketPath)
	if len(path) > maxSocketPath {
		return nil, nil, errNoShm
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
			return nil, nil, errNoShm
		}
		return nil, nil, fmt.Errorf("connect to feed %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	cn := &conn{c: uc, path: path}
	stop := cn.watch(ctx)
	msgs, err := readRegion(uc)
	stop()
	if err != nil {
		_ = uc.Close()
		return nil, nil, cn.fail(ctx, "read the stream's start", err)
	}
	return cn, msgs, nil
}

var errNoShm = errors.New("no shared-memory feed socket")

// readRegion reads the stream's first frame, mapping the region it
// brings. A stream without one (the executor had no memfd) has every
// message inline.
func readRegion(uc *net.UnixConn) (*shmMessages, error) {
	var f [shmFrameBytes]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(f[:], oob)
	if err != nil {
		return nil, err
	}
	var fd = -1
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr == nil && len(msgs) == 1 {
			if fds, ferr := unix.ParseUnixRights(&msgs[0]); ferr == nil && len(fds) == 1 {
				fd = fds[0]
			}
		}
	}
	s := &shmMessages{uc: uc}
	s.refs.Store(1)
	first := f[:n]
	if n == shmFrameBytes && f[0] == frameRegion {
		if fd < 0 {
			return nil, fmt.Errorf("%w: the region frame came without its memory", ErrBadStream)
		}
		defer unix.Close(fd)
		_, size, _ := parseFrame(f[:])
		// The connection carries frees until the last batch is released.
		m, err := mapShm(fd, int64(size), s.sendFree, func() { _ = uc.Close() })
		if err != nil {
			return nil, err
		}
		s.m = m
		first = nil
	} else if fd >= 0 {
		unix.Close(fd)
	}
	// A short first read, or a stream with no region, keeps what it read.
	s.br = bufio.NewReaderSize(io.MultiReader(&prefixReader{b: first}, uc), readBufferBytes)
	return s, nil
}

type prefixReader struct{ b []byte }

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.b)
	p.b = p.b[n:]
	return n, nil
}

// shmMessages is the client's ipc.MessageReader of a shared-memory
// stream. A message's body stays in the region; its buffer's allocator is
// the mapping, whose Free tells the executor the space is free again.
type shmMessages struct {
	uc   *net.UnixConn
	br   *bufio.Reader
	m    *shmMapping // nil: every message inline
	cur  *ipc.Message
	refs atomic.Int64
	done bool

	wmu sync.Mutex // serialises frees, which come from any goroutine
}

var _ ipc.MessageReader = (*shmMessages)(nil)

func (s *shmMessages) Retain() { s.refs.Add(1) }

func (s *shmMessages) Release() {
	if s.refs.Add(-1) == 0 && s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
}

// sendFree tells the executor that the message at off is released. A
// connection already closed needs no telling.
func (s *shmMessages) sendFree(off uint64) {
	var b [shmFreeBytes]byte
	binary.LittleEndian.PutUint64(b[:], off)
	s.wmu.Lock()
	_, _ = s.uc.Write(b[:])
	s.wmu.Unlock()
}

// Message returns the next message, or io.EOF after the end frame. The
// previous message is released.
func (s *shmMessages) Message() (*ipc.Message, error) {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	b, off, shared, err := s.next()
	if err != nil {
		return nil, err
	}
	var msg *ipc.Message
	if shared {
		msg, err = s.shared(b, off)
	} else {
		msg, err = inlineMessage(b)
	}
	if err != nil {
		return nil, err
	}
	s.cur = msg
	return msg, nil
}

// next returns the next message's bytes: in the region at off (shared),
// to be freed by the caller, or read inline. It returns io.EOF after the
// end frame.
func (s *shmMessages) next() (b []byte, off uint64, shared bool, err error) {
	if s.done {
		return nil, 0, false, io.EOF
	}
	var f [shmFrameBytes]byte
	if _, err := io.ReadFull(s.br, f[:]); err != nil {
		// A stream without its end frame was cut. An executor that
		// stops on an error closes its side with the client's frees
		// unread, which the client may see as a reset.
		if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, false, err
	}
	kind, a, n := parseFrame(f[:])
	switch kind {
	case frameEnd:
		s.done = true
		return nil, 0, false, io.EOF
	case frameInline:
		if a > maxTensorBatchBytes {
			return nil, 0, false, fmt.Errorf("%w: an inline message of %d bytes", ErrBadStream, a)
		}
		b := make([]byte, a)
		if _, err := io.ReadFull(s.br, b); err != nil {
			return nil, 0, false, fmt.Errorf("%w: %w", io.ErrUnexpectedEOF, err)
		}
		return b, 0, false, nil
	case frameMessage:
		if s.m == nil {
			return nil, 0, false, fmt.Errorf("%w: a message in shared memory, but no region", ErrBadStream)
		}
		if a > uint64(len(s.m.mem)) || n > uint64(len(s.m.mem))-a {
			return nil, 0, false, fmt.Errorf("%w: a message at %d+%d outside the %d-byte region", ErrBadStream, a, n, len(s.m.mem))
		}
		return s.m.mem[a : a+n], a, true, nil
	}
	return nil, 0, false, fmt.Errorf("%w: unknown frame kind %#x", ErrBadStream, kind)
}

// splitMessage splits an encapsulated IPC message into its metadata and
// body.
func splitMessage(b []byte) (meta, body []byte, err error) {
	if len(b) >= 4 && string(b[:4]) == tensorMagic {
		return nil, nil, fmt.Errorf("%w: the feed speaks the tensor format, not Arrow IPC (read it with DialTensor)", ErrBadStream)
	}
	if len(b) < 8 || binary.LittleEndian.Uint32(b) != 0xffffffff {
		return nil, nil, fmt.Errorf("%w: a message without its continuation marker", ErrBadStream)
	}
	n := int64(int32(binary.LittleEndian.Uint32(b[4:])))
	if n <= 0 || 8+n > int64(len(b)) {
		return nil, nil, fmt.Errorf("%w: a message's metadata of %d bytes in %d", ErrBadStream, n, len(b))
	}
	return b[8 : 8+n], b[8+n:], nil
}

func inlineMessage(b []byte) (*ipc.Message, error) {
	meta, body, err := splitMessage(b)
	if err != nil {
		return nil, err
	}
	return ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body)), nil
}

// shared returns the message b at off in the region. Its metadata is
// copied out (it is small, and the IPC reader keeps parts of it); its
// body stays in place until every buffer cut from it is released.
func (s *shmMessages) shared(b []byte, off uint64) (*ipc.Message, error) {
	meta, body, err := splitMessage(b)
	if err != nil {
		s.sendFree(off)
		return nil, err
	}
	metaBuf := memory.NewBufferBytes(append([]byte(nil), meta...))
	if len(body) == 0 {
		s.sendFree(off)
		return ipc.NewMessage(metaBuf, memory.NewBufferBytes(nil)), nil
	}
	s.m.mu.Lock()
	s.m.body[uintptr(unsafe.Pointer(unsafe.SliceData(body)))] = off
	s.m.refs++
	s.m.mu.Unlock()
	bodyBuf := memory.NewBufferWithAllocator(body, s.m)
	msg := ipc.NewMessage(metaBuf, bodyBuf)
	bodyBuf.Release() // the message holds it now
	return msg, nil
}

// close releases the current message and drops the epoch's hold on the
// region. The connection closes now without a region, else once every
// batch read from the region is released (its frees go over it); an
// epoch closed before its end tells the executor first, which then stops
// sending.
func (s *shmMessages) close() {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	if s.m == nil {
		_ = s.uc.Close()
		return
	}
	if !s.done {
		s.sendFree(shmAbandon)
		s.drain()
	}
	s.m.close()
}

// shmDrainTime bounds how long closing an epoch early waits for the rest
// of the stream.
const shmDrainTime = 5 * time.Second

// drain reads the frames the executor sent before it saw the epoch
// abandoned and frees their messages, which nobody will read, up to the
// end of the stream.
func (s *shmMessages) drain() {
	_ = s.uc.SetReadDeadline(time.Now().Add(shmDrainTime))
	var f [shmFrameBytes]byte
	for {
		if _, err := io.ReadFull(s.br, f[:]); err != nil {
			return
		}
		switch kind, a, _ := parseFrame(f[:]); kind {
		case frameMessage:
			s.sendFree(a)
		case frameInline:
			if _, err := s.br.Discard(int(min(a, maxTensorBatchBytes))); err != nil {
				return
			}
		default:
			return
		}
	}
}

// Allocate is part of memory.Allocator; the mapping never allocates.
func (m *shmMapping) Allocate(int) []byte { panic("wire: the shared-memory region does not allocate") }

// Reallocate is part of memory.Allocator; the mapping never allocates.
func (m *shmMapping) Reallocate(int, []byte) []byte {
	panic("wire: the shared-memory region does not allocate")
}

// Free hands a message's space back: its body's last reference is gone.
func (m *shmMapping) Free(b []byte) {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	m.mu.Lock()
	off, ok := m.body[addr]
	if ok {
		delete(m.body, addr)
		m.unrefLocked()
	}
	m.mu.Unlock()
	if ok {
		m.free(off)
	}
}

// newShmTensorEpoch reads the header of a shared-memory tensor stream.
func newShmTensorEpoch(ctx context.Context, c *conn, msgs *shmMessages) (*TensorEpoch, error) {
	t := &TensorEpoch{c: c, shm: msgs, prev: noMessage}
	stop := c.watch(ctx)
	b, off, shared, err := msgs.next()
	stop()
	if err == nil {
		t.br = bufio.NewReader(bytes.NewReader(b))
		err = t.readHeader()
		t.br = nil
		if shared {
			msgs.sendFree(off)
		}
	}
	if err != nil {
		msgs.close()
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: stream ended before its header", ErrTruncated)
		}
		return nil, c.fail(ctx, "read header", err)
	}
	return t, nil
}

// noMessage marks that a shared-memory tensor epoch holds no message.
const noMessage = ^uint64(0)

// nextShm reads the next batch of a shared-memory stream: its slices are
// the message in the region, freed at the next call.
func (t *TensorEpoch) nextShm(ctx context.Context) (TensorBatch, error) {
	t.freePrev()
	stop := t.c.watch(ctx)
	b, off, shared, err := t.shm.next()
	stop()
	if errors.Is(err, io.EOF) {
		t.done = true
		t.taken.End = true
		return TensorBatch{}, io.EOF
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: no end-of-epoch frame", ErrTruncated)
		}
		return TensorBatch{}, t.c.fail(ctx, "read batch", err)
	}
	if shared {
		t.prev = off
	}
	nf, perRow := len(t.features), len(t.features)
	if t.hasLabel {
		perRow++
	}
	if len(b) < 4 || len(b)%4 != 0 {
		return TensorBatch{}, t.c.fail(ctx, "read batch", fmt.Errorf("%w: a batch frame of %d bytes", ErrBadStream, len(b)))
	}
	rows := int(binary.LittleEndian.Uint32(b))
	if uint64(len(b)) != 4+4*uint64(rows)*uint64(perRow) || rows == 0 {
		return TensorBatch{}, t.c.fail(ctx, "read batch", fmt.Errorf("%w: a batch frame of %d bytes for %d rows × %d values", ErrBadStream, len(b), rows, perRow))
	}
	vals := bytesF32(b[4:])
	if !littleEndian {
		raw := b[4:]
		for i := 0; i < len(raw); i += 4 {
			binary.NativeEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
		}
	}
	batch := TensorBatch{Rows: rows, Features: vals[:rows*nf]}
	if t.hasLabel {
		batch.Labels = vals[rows*nf:]
	}
	t.taken.Batches++
	t.taken.Rows += int64(rows)
	return batch, nil
}

// freePrev frees the message of the batch returned last.
func (t *TensorEpoch) freePrev() {
	if t.prev != noMessage {
		t.shm.sendFree(t.prev)
		t.prev = noMessage
	}
}
