package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	flatbuffers "github.com/google/flatbuffers/go"
)

// Batches sent where they lie.
//
// A pipeline made with a SharedRegion decodes batches into the region's
// lent space. Such a batch is not copied into a message: the message is
// its IPC metadata alone, written into the message space, whose body is
// declared to run from the end of the metadata to the end of the batch's
// last buffer, and whose buffer offsets point at the buffers where they
// lie, further on in the region. The message is a valid encapsulated IPC
// message of the length its frame gives, so clients read it as any other
// (a client that copies messages out of the region copies what lies
// between too). The server holds the batch until the client frees the
// message.

// Where the Arrow Message and RecordBatch tables (format/Message.fbs)
// keep the fields patched here, as flatbuffers vtable slots.
const (
	fbMessageHeaderType = 4 + 2*1 // Message.header_type
	fbMessageHeader     = 4 + 2*2 // Message.header
	fbMessageBodyLength = 4 + 2*3 // Message.bodyLength
	fbRecordBuffers     = 4 + 2*2 // RecordBatch.buffers
	fbRecordCompression = 4 + 2*3 // RecordBatch.compression
	fbHeaderRecordBatch = 3       // MessageHeader.RecordBatch
	fbBufferBytes       = 16      // struct Buffer { offset: long; length: long }
)

// recordMeta is where a record batch message's metadata keeps its body
// length and its buffers.
type recordMeta struct {
	bodyLength flatbuffers.UOffsetT // of the int64
	buffers    flatbuffers.UOffsetT // of the first Buffer struct
	nbuf       int
}

// parseRecordMeta finds the fields of a RecordBatch message's metadata
// that writeInPlace patches; false for any other message, and for a
// compressed batch.
func parseRecordMeta(meta []byte) (recordMeta, bool) {
	if len(meta) < 8 {
		return recordMeta{}, false
	}
	msg := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	if msg.GetByteSlot(fbMessageHeaderType, 0) != fbHeaderRecordBatch {
		return recordMeta{}, false
	}
	hdr, body := msg.Offset(fbMessageHeader), msg.Offset(fbMessageBodyLength)
	if hdr == 0 || body == 0 {
		return recordMeta{}, false
	}
	rb := flatbuffers.Table{Bytes: meta, Pos: msg.Indirect(msg.Pos + flatbuffers.UOffsetT(hdr))}
	bufs := rb.Offset(fbRecordBuffers)
	if bufs == 0 || rb.Offset(fbRecordCompression) != 0 {
		return recordMeta{}, false
	}
	m := recordMeta{bodyLength: msg.Pos + flatbuffers.UOffsetT(body),
		buffers: rb.Vector(flatbuffers.UOffsetT(bufs)), nbuf: rb.VectorLen(flatbuffers.UOffsetT(bufs))}
	if int(m.buffers)+m.nbuf*fbBufferBytes > len(meta) || int(m.bodyLength)+8 > len(meta) {
		return recordMeta{}, false
	}
	return m, true
}

// bodyRecorder records the buffers an ipc.Payload's body is made of, in
// order, leaving out the padding written after them.
type bodyRecorder struct {
	bufs [][]byte
	pad  int // padding still to come after the last buffer
}

func (r *bodyRecorder) Write(p []byte) (int, error) {
	if r.pad > 0 && len(p) == r.pad {
		r.pad = 0
		return len(p), nil
	}
	r.bufs = append(r.bufs, p)
	r.pad = int(pad8(int64(len(p))) - int64(len(p)))
	return len(p), nil
}

func pad8(n int64) int64 { return (n + 7) &^ 7 }

// writeInPlace sends the record batch message p, of the batch being sent
// (w.batch), as metadata pointing at the batch's buffers where they lie
// in the lent space. It returns false, having sent nothing, when some
// buffer lies elsewhere or p is not such a message, and the caller then
// copies the message as usual; full says the region had no room for it
// however long it waited, so the copy goes inline.
func (w *shmWriter) writeInPlace(p ipc.Payload) (done, full bool, err error) {
	var body bodyRecorder
	if err := p.SerializeBody(&body); err != nil {
		return false, false, nil
	}
	offs := make([]uint64, len(body.bufs))
	var charge int64
	for i, b := range body.bufs {
		off, ok := w.region.lentOffset(b)
		if !ok {
			return false, false, nil
		}
		offs[i] = off
		charge += int64(len(b))
	}
	metaBuf := p.Meta()
	if metaBuf == nil {
		return false, false, nil
	}
	defer metaBuf.Release()
	meta := metaBuf.Bytes()
	rm, ok := parseRecordMeta(meta)
	if !ok {
		return false, false, nil
	}
	// Every buffer the metadata gives bytes to is one the body holds.
	k := 0
	for i := 0; i < rm.nbuf; i++ {
		n := int64(binary.LittleEndian.Uint64(meta[int(rm.buffers)+i*fbBufferBytes+8:]))
		if n == 0 {
			continue
		}
		if k == len(body.bufs) || int64(len(body.bufs[k])) != n {
			return false, false, nil
		}
		k++
	}
	if k != len(body.bufs) {
		return false, false, nil
	}

	head := 8 + pad8(int64(len(meta)))
	off, ok, err := w.reserve(head, charge)
	if err != nil || !ok {
		return false, err == nil, err
	}
	dst := w.region.mem[off : off+uint64(head)]
	binary.LittleEndian.PutUint32(dst, 0xffffffff)
	binary.LittleEndian.PutUint32(dst[4:], uint32(head-8))
	clear(dst[8+copy(dst[8:], meta):])
	start := off + uint64(head) // the body's first byte
	end := start
	k = 0
	for i := 0; i < rm.nbuf; i++ {
		at := dst[8+int(rm.buffers)+i*fbBufferBytes:]
		if binary.LittleEndian.Uint64(at[8:]) == 0 {
			binary.LittleEndian.PutUint64(at, 0)
			continue
		}
		if offs[k] < start {
			panic(fmt.Sprintf("wire: a lent buffer at %d lies before its message's body at %d", offs[k], start))
		}
		binary.LittleEndian.PutUint64(at, offs[k]-start)
		end = max(end, offs[k]+uint64(pad8(int64(len(body.bufs[k])))))
		k++
	}
	binary.LittleEndian.PutUint64(dst[8+int(rm.bodyLength):], end-start)

	w.batch.Retain()
	w.share.add(w.region, off, w.batch)
	w.frames = putFrame(w.frames, frameMessage, off, end-off)
	w.stream.Add(head + charge) // what the client receives
	w.inPlace.Add(1)
	return true, false, nil
}
