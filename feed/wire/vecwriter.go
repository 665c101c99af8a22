package wire

import (
	"io"
	"net"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// goAllocator is the allocator of arrow-mode ipc.Writers.
var goAllocator = memory.NewGoAllocator()

// Thresholds of vecWriter.
const (
	// copyBelow is the size under which a piece is copied rather than
	// referenced: message prefixes, padding and tiny buffers are cheaper
	// to copy than to gather.
	copyBelow = 512
	// flushAbove is how many bytes vecWriter gathers before it writes:
	// several messages of small batches go out in one writev.
	flushAbove = 1 << 20
	// maxPieces bounds the pieces of one writev (the kernel takes at most
	// 1024 vectors a call).
	maxPieces = 1000
)

// vecWriter is the arrow-mode stream's ipc.PayloadWriter. Where an
// ipc.Writer over a bufio.Writer copies every column buffer once more
// before the kernel copies it into the socket, vecWriter hands the column
// buffers to the kernel in place, gathering the messages of small batches
// into one writev, and copies only the small pieces.
//
// A referenced piece must stay valid and unchanged until the writev that
// sends it. The batches themselves are held for that long (hold), and the
// pieces the ipc.Writer makes itself (metadata, realigned bitmaps) come
// from the Go allocator (see newArrowWriter), whose memory the garbage
// collector keeps while it is referenced.
type vecWriter struct {
	conn  *net.UnixConn
	bytes *atomic.Int64 // counts what was sent

	small  []byte
	pieces []piece
	vec    net.Buffers
	queued int                 // bytes in pieces
	held   []arrow.RecordBatch // batches referenced by pieces
}

// piece is a part of the pending output: a range of small, or a
// reference to a buffer.
type piece struct {
	off, n int
	ref    []byte
}

var _ ipc.PayloadWriter = (*vecWriter)(nil)

func newVecWriter(conn *net.UnixConn, bytes *atomic.Int64) *vecWriter {
	return &vecWriter{conn: conn, bytes: bytes, small: make([]byte, 0, 64<<10)}
}

// newArrowWriter returns an ipc.Writer of an arrow-mode stream over v.
// Its allocator is the Go allocator: what it allocates stays valid for as
// long as v references it, whatever the writer does with it afterwards.
func newArrowWriter(v *vecWriter, schema *arrow.Schema) *ipc.Writer {
	return ipc.NewWriterWithPayloadWriter(v, ipc.WithSchema(schema), ipc.WithAllocator(goAllocator))
}

// hold keeps rec, which the caller hands over, until the pieces written
// since are sent.
func (v *vecWriter) hold(rec arrow.RecordBatch) { v.held = append(v.held, rec) }

// Start is part of ipc.PayloadWriter; the stream format has no preamble.
func (v *vecWriter) Start() error { return nil }

// WritePayload queues one IPC message and writes what is queued once it
// is large enough.
func (v *vecWriter) WritePayload(p ipc.Payload) error {
	if _, err := p.WritePayload(v); err != nil {
		return err
	}
	if v.queued >= flushAbove || len(v.pieces) >= maxPieces {
		return v.Flush()
	}
	return nil
}

// Close ends the stream with the end-of-stream marker and flushes.
func (v *vecWriter) Close() error {
	_, _ = v.Write(arrowEOS[:])
	return v.Flush()
}

// Write queues p, copying it when it is small and referencing it until
// the next Flush otherwise.
func (v *vecWriter) Write(p []byte) (int, error) {
	v.queued += len(p)
	if len(p) >= copyBelow {
		v.pieces = append(v.pieces, piece{ref: p})
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

// Flush writes everything queued and releases the batches held for it.
func (v *vecWriter) Flush() error {
	defer v.release()
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
	v.clearQueue()
	vec := v.vec // WriteTo consumes the slice it is given
	n, err := vec.WriteTo(v.conn)
	clear(v.vec[:cap(v.vec)])
	v.bytes.Add(n)
	if err != nil {
		return &consumerError{err}
	}
	return nil
}

// release lets go of the batches held.
func (v *vecWriter) release() {
	for i, rec := range v.held {
		rec.Release()
		v.held[i] = nil
	}
	v.held = v.held[:0]
}

// clearQueue empties the queue, dropping its references to the caller's
// buffers.
func (v *vecWriter) clearQueue() {
	clear(v.pieces)
	v.pieces = v.pieces[:0]
	v.small = v.small[:0]
	v.queued = 0
}

// reset drops whatever is queued without sending it, releasing the
// batches held; the stream it belonged to is over.
func (v *vecWriter) reset() {
	v.clearQueue()
	v.release()
}

// abort cuts the stream so that readers fail instead of taking the cut
// for a clean end: whatever is queued, then a continuation token with no
// message length after it.
func (v *vecWriter) abort() {
	_, _ = v.Write(abortMarker)
	_ = v.Flush()
}

var _ io.Writer = (*vecWriter)(nil)
