package flighttest

import (
	"encoding/binary"

	flatbuffers "github.com/google/flatbuffers/go"
)

// HugeSchemaMessage is the metadata of an Arrow IPC schema message, a
// few dozen bytes, whose field vector claims fields fields (one is
// there): what a hostile producer or Flight service sends to make a
// decoder that trusts the count allocate them all.
func HugeSchemaMessage(fields uint32) []byte {
	b := flatbuffers.NewBuilder(0)
	name := b.CreateString("x")
	// Field: 0 name, ... 6 custom_metadata.
	b.StartObject(7)
	b.PrependUOffsetTSlot(0, name, 0)
	field := b.EndObject()
	b.StartVector(4, 1, 4)
	b.PrependUOffsetT(field)
	vec := b.EndVector(1)
	// Schema: 0 endianness, 1 fields, 2 custom_metadata, 3 features.
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, vec, 0)
	schema := b.EndObject()
	// Message: 0 version (V5 = 4), 1 header_type (Schema = 1), 2 header.
	b.StartObject(5)
	b.PrependInt16Slot(0, 4, 0)
	b.PrependByteSlot(1, 1, 0)
	b.PrependUOffsetTSlot(2, schema, 0)
	b.Finish(b.EndObject())
	buf := b.FinishedBytes()
	binary.LittleEndian.PutUint32(buf[len(buf)-int(vec):], fields)
	return buf
}

// Encapsulated is meta as an encapsulated IPC message (0xFFFFFFFF, its
// length, the flatbuffer), the way a FlightInfo carries its schema.
func Encapsulated(meta []byte) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{0xff, 0xff, 0xff, 0xff}, uint32(len(meta)))
	return append(b, meta...)
}
