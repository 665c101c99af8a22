package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"
)

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
		_, size, flags := parseFrame(f[:])
		// The connection carries frees until the last batch is released.
		m, err := mapShm(fd, int64(size), s.sendFree, func() { _ = uc.Close() })
		if err != nil {
			return nil, err
		}
		s.m = m
		first = nil
		if flags&regionHolds != 0 {
			s.sendFree(shmHello) // before any free: this client answers 'H'
		}
	} else if fd >= 0 {
		unix.Close(fd)
	}
	// A short first read, or a stream with no region, keeps what it read.
	s.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(first), uc), readBufferBytes)
	return s, nil
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
	kind, a, n := byte(frameHold), uint64(0), uint64(0)
	for kind == frameHold {
		if _, err := io.ReadFull(s.br, f[:]); err != nil {
			// A stream without its end frame was cut. An executor that
			// stops on an error closes its side with the client's frees
			// unread, which the client may see as a reset.
			if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) {
				err = io.ErrUnexpectedEOF
			}
			return nil, 0, false, err
		}
		if kind, a, n = parseFrame(f[:]); kind == frameHold {
			// The process asks for the message after the last one
			// sent: the executor waits for that to end the epoch.
			s.sendFree(shmAtHold)
		}
	}
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

// shmDrainIdle bounds how long closing an epoch early waits for the next
// frame of the rest of the stream: an executor that sends nothing for
// that long is taken for stuck. The bound is per frame, not for the whole
// drain, so that a busy machine's slow executor is drained to the end:
// every message left undrained stays taken until the connection closes,
// and the next epoch finds the region that much fuller.
const shmDrainIdle = 5 * time.Second

// drain reads the frames the executor sent before it saw the epoch
// abandoned and frees their messages, which nobody will read, up to the
// end of the stream.
func (s *shmMessages) drain() {
	var f [shmFrameBytes]byte
	for {
		_ = s.uc.SetReadDeadline(time.Now().Add(shmDrainIdle))
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
		case frameHold:
			s.sendFree(shmAtHold)
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
	perRow := t.valuesPerRow()
	if len(b) < 4 || len(b)%4 != 0 {
		return TensorBatch{}, t.c.fail(ctx, "read batch", fmt.Errorf("%w: a batch frame of %d bytes", ErrBadStream, len(b)))
	}
	rows := int(binary.LittleEndian.Uint32(b))
	if uint64(len(b)) != 4+4*uint64(rows)*uint64(perRow) || rows == 0 {
		return TensorBatch{}, t.c.fail(ctx, "read batch", fmt.Errorf("%w: a batch frame of %d bytes for %d rows × %d values", ErrBadStream, len(b), rows, perRow))
	}
	return t.batch(rows, bytesF32(b[4:])), nil
}

// freePrev frees the message of the batch returned last.
func (t *TensorEpoch) freePrev() {
	if t.prev != noMessage {
		t.shm.sendFree(t.prev)
		t.prev = noMessage
	}
}
