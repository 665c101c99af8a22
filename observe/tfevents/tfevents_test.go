package tfevents

import (
	"encoding/binary"
	"math"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestMaskedCRCCheckValue: CRC-32C of "123456789" is 0xE3069283 (its
// published check value), masked as TFRecord masks it.
func TestMaskedCRCCheckValue(t *testing.T) {
	c := uint32(0xE3069283)
	if got, want := maskedCRC([]byte("123456789")), (c>>15|c<<17)+0xa282ead8; got != want {
		t.Fatalf("maskedCRC = %#x, want %#x", got, want)
	}
}

// TestScalarsRecords reads a written file back record by record: framing,
// both CRCs, the version event, and a scalar's step, tag and value.
func TestScalarsRecords(t *testing.T) {
	w, err := Create(t.TempDir(), "host", time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Scalars(time.Unix(101, 0), 7, map[string]float64{"loss/rank 1": 0.25}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	var records [][]byte
	for len(b) > 0 {
		n := binary.LittleEndian.Uint64(b[:8])
		if maskedCRC(b[:8]) != binary.LittleEndian.Uint32(b[8:12]) {
			t.Fatal("length CRC does not match")
		}
		data := b[12 : 12+n]
		if maskedCRC(data) != binary.LittleEndian.Uint32(b[12+n:16+n]) {
			t.Fatal("data CRC does not match")
		}
		records = append(records, data)
		b = b[16+n:]
	}
	if len(records) != 2 {
		t.Fatalf("%d records, want 2", len(records))
	}
	fields := func(m []byte) map[protowire.Number][]byte {
		out := map[protowire.Number][]byte{}
		for len(m) > 0 {
			num, typ, n := protowire.ConsumeTag(m)
			m = m[n:]
			n = protowire.ConsumeFieldValue(num, typ, m)
			out[num] = m[:n]
			m = m[n:]
		}
		return out
	}
	if v, _ := protowire.ConsumeString(fields(records[0])[3]); v != "brain.Event:2" {
		t.Errorf("file version %q", v)
	}
	ev := fields(records[1])
	if step, _ := protowire.ConsumeVarint(ev[2]); step != 7 {
		t.Errorf("step %d", step)
	}
	summary, _ := protowire.ConsumeBytes(ev[5])
	value, _ := protowire.ConsumeBytes(fields(summary)[1])
	vf := fields(value)
	tag, _ := protowire.ConsumeString(vf[1])
	bits, _ := protowire.ConsumeFixed32(vf[2])
	if tag != "loss/rank 1" || math.Float32frombits(bits) != 0.25 {
		t.Errorf("value %q = %v", tag, math.Float32frombits(bits))
	}
}
