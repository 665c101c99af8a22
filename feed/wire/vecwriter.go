package wire

import (
	"io"
	"net"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// Thresholds of vecWriter.
const (
	// copyBelow is the size under which a piece is copied rather than
	// referenced: small pieces (message prefixes, metadata, padding, the
	// buffers of small batches) are cheaper to copy than to gather.
	copyBelow = 16 << 10
	// flushAbove is how much copied data vecWriter collects before it
	// writes, like a bufio.Writer of that size.
	flushAbove = 1 << 20
)

// vecWriter is the arrow-mode stream's ipc.PayloadWriter. Where an
// ipc.Writer over a bufio.Writer copies every column buffer once more
// before the kernel copies it into the socket, vecWriter hands large
// buffers to the kernel in place with one writev per message, and copies
// only small pieces.
type vecWriter struct {
	conn  *net.UnixConn
	bytes *atomic.Int64 // counts what was sent

	small  []byte
	pieces []piece
	vec    net.Buffers
	big    bool // a piece references caller memory: flush before returning
}

// piece is a part of the pending output: a range of small, or a
// reference to a large buffer.
type piece struct {
	off, n int
	ref    []byte
}

var _ ipc.PayloadWriter = (*vecWriter)(nil)

func newVecWriter(conn *net.UnixConn, bytes *atomic.Int64) *vecWriter {
	return &vecWriter{conn: conn, bytes: bytes, small: make([]byte, 0, flushAbove+copyBelow)}
}

// Start is part of ipc.PayloadWriter; the stream format has no preamble.
func (v *vecWriter) Start() error { return nil }

// WritePayload queues one IPC message. Large body buffers are only
// referenced, so they are written before WritePayload returns, while the
// payload still holds them.
func (v *vecWriter) WritePayload(p ipc.Payload) error {
	if _, err := p.WritePayload(v); err != nil {
		return err
	}
	if v.big || len(v.small) >= flushAbove {
		return v.Flush()
	}
	return nil
}

// Close ends the stream with the end-of-stream marker and flushes.
func (v *vecWriter) Close() error {
	_, _ = v.Write(arrowEOS[:])
	return v.Flush()
}

// Write queues p, copying it when it is small. A large p is referenced
// until the next Flush, which WritePayload calls before returning.
func (v *vecWriter) Write(p []byte) (int, error) {
	if len(p) >= copyBelow {
		v.pieces = append(v.pieces, piece{ref: p})
		v.big = true
		return len(p), nil
	}
	if n := len(v.pieces); n > 0 && v.pieces[n-1].ref == nil {
		v.pieces[n-1].n += len(p) // extends the previous copied piece
	} else {
		v.pieces = append(v.pieces, piece{off: len(v.small), n: len(p)})
	}
	v.small = append(v.small, p...)
	return len(p), nil
}

// Flush writes everything queued.
func (v *vecWriter) Flush() error {
	if len(v.pieces) == 0 {
		return nil
	}
	v.vec = v.vec[:0]
	for _, pc := range v.pieces {
		if pc.ref != nil {
			v.vec = append(v.vec, pc.ref)
		} else {
			v.vec = append(v.vec, v.small[pc.off:pc.off+pc.n])
		}
	}
	clear(v.pieces) // drop references to the caller's buffers
	v.pieces = v.pieces[:0]
	v.small = v.small[:0]
	v.big = false
	vec := v.vec // WriteTo consumes the slice it is given
	n, err := vec.WriteTo(v.conn)
	clear(v.vec[:cap(v.vec)])
	v.bytes.Add(n)
	if err != nil {
		return &consumerError{err}
	}
	return nil
}

// abort cuts the stream so that readers fail instead of taking the cut
// for a clean end: whatever is queued, then a continuation token with no
// message length after it.
func (v *vecWriter) abort() {
	_, _ = v.Write(abortMarker)
	_ = v.Flush()
}

var _ io.Writer = (*vecWriter)(nil)
