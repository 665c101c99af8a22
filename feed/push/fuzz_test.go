package push

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// The fuzz input is a stream of Flight messages, each a 4-byte length
// and that many bytes of metadata (an IPC message's flatbuffer), then a
// 4-byte length and that many bytes of body; lengths past the input's
// end take what is left. It models what gRPC hands DoPut: messages whose
// sizes the transport bounds, with any content.

// framed encodes batches as a producer's DoPut carries them, in the
// fuzz input's framing.
func framed(t testing.TB, batches ...arrow.RecordBatch) []byte {
	var sent capture
	w := flight.NewRecordWriter(&sent, ipc.WithSchema(batches[0].Schema()))
	for _, b := range batches {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return sent.b
}

// capture is a Flight stream that frames what is sent on it.
type capture struct{ b []byte }

func (c *capture) Send(fd *flight.FlightData) error {
	c.b = frame(c.b, fd.DataHeader, fd.DataBody)
	return nil
}

func frame(out, meta, body []byte) []byte {
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	out = append(out, meta...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(body)))
	return append(out, body...)
}

// messages is the fuzz input as Flight messages.
type messages struct{ b []byte }

func (m *messages) take() []byte {
	if len(m.b) < 4 {
		m.b = nil
		return nil
	}
	n := min(int(binary.LittleEndian.Uint32(m.b)), len(m.b)-4)
	out := m.b[4 : 4+n]
	m.b = m.b[4+n:]
	return out
}

func (m *messages) Recv() (*flight.FlightData, error) {
	if len(m.b) == 0 {
		return nil, io.EOF
	}
	return &flight.FlightData{DataHeader: m.take(), DataBody: m.take()}, nil
}

// decodeValidated decodes a pushed stream as DoPut does (every message
// checked by feed.CheckedFlightStream, then arrow-go's Flight reader) and
// returns the batches it would deal: those before the first that
// ValidateBatch refuses. A panic of the decoder fails the one call in the
// endpoint (its gRPC server recovers handlers' panics), so here it ends
// the stream too; an allocation it cannot make ends the process, and the
// fuzzing.
func decodeValidated(b []byte) (out []arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decoder panicked: %v", p)
		}
	}()
	rd, err := flight.NewRecordReader(feed.CheckedFlightStream(&messages{b: b}))
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	for rd.Next() {
		rec := rd.RecordBatch()
		if err := feed.ValidateBatch(rec); err != nil {
			return out, err
		}
		rec.Retain()
		out = append(out, rec)
	}
	return out, rd.Err()
}

// FuzzPushedStream feeds a pushed stream of any messages to the push
// endpoint's dealer, as DoPut does: every batch that passes validation
// must be cut into ranks' shares and read back without a panic, which
// in the dealer would take the driver's job down with it
// (testdata/fuzz/FuzzPushedStream holds the crashers found).
func FuzzPushedStream(f *testing.F) {
	f.Add(framed(f, flighttest.NameBatch(4, []int32{0, 1, 2, 3, 4}, "abcd"), flighttest.NameBatch(3, []int32{0, 2, 2, 5}, "hello")))
	f.Add(framed(f, flighttest.NameBatch(4, []int32{0, 9, 2, 3, 4}, "abcd")))
	f.Add(framed(f, flightBatches(0, 2, 5)...))
	f.Add(frame(nil, flighttest.HugeSchemaMessage(1<<31-1), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		batches, _ := decodeValidated(b)
		d := newPushDealer(2, 3, feed.EvenPad, 1<<40)
		defer d.close()
		ctx := context.Background()
		for _, rec := range batches {
			if err := d.add(ctx, rec, 0); err != nil {
				t.Fatalf("deal a validated batch: %v", err)
			}
		}
		d.end()
		for r := range 2 {
			for {
				rec, err := d.take(ctx, r)
				if err != nil {
					break
				}
				for i, c := range rec.Columns() {
					if err := array.ValidateFull(c); err != nil {
						t.Fatalf("rank %d's share, column %d: %v", r, i, err)
					}
					for j := range c.Len() {
						_ = c.ValueStr(j)
					}
				}
				rec.Release()
			}
		}
	})
}
