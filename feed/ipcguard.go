package feed

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// Arrow IPC metadata from other processes (a pushed stream, a Flight
// service's schema and stream, an --input file's footer) is a flatbuffer
// that arrow-go decodes without checking it: a schema message of a few
// hundred bytes whose field vector claims two billion fields makes it
// allocate that many fields up front, and the process dies of an
// allocation no recover can catch. CheckIPCMessage and checkIPCSchema
// walk that metadata first: every vector must fit in the bytes that hold
// it, and a schema may declare at most maxSchemaFields fields (children
// included, each time a field is reached) and maxSchemaMetadata metadata
// entries, nested at most maxSchemaDepth deep. Beyond that arrow-go's
// allocations are bounded by the message's size.
const (
	maxSchemaFields   = 1 << 20
	maxSchemaMetadata = 1 << 20
	maxSchemaDepth    = 256
)

// Message header types (Arrow's MessageHeader union).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
)

// CheckIPCMessage checks the flatbuffer of one Arrow IPC message's
// metadata (a Flight message's data header; empty for none) before
// arrow-go decodes it.
func CheckIPCMessage(meta []byte) error {
	if len(meta) == 0 {
		return nil
	}
	msg, err := fbRoot(meta)
	if err != nil {
		return fmt.Errorf("arrow message: %w", err)
	}
	var g schemaGuard
	// Message: 0 version, 1 header_type, 2 header, 3 bodyLength,
	// 4 custom_metadata.
	if err := g.metadata(msg, 4); err != nil {
		return err
	}
	typ, err := msg.uint8Field(1)
	if err != nil {
		return fmt.Errorf("arrow message: %w", err)
	}
	hdr, ok, err := msg.tableField(2)
	if err != nil || !ok {
		return err
	}
	switch typ {
	case headerSchema:
		return g.schema(hdr)
	case headerDictionaryBatch:
		// DictionaryBatch: 0 id, 1 data (a RecordBatch), 2 isDelta.
		data, ok, err := hdr.tableField(1)
		if err != nil || !ok {
			return err
		}
		return recordBatchVectors(data)
	case headerRecordBatch:
		return recordBatchVectors(hdr)
	}
	return nil
}

// checkIPCSchema checks the schema of an Arrow IPC file's footer (field 1
// of the Footer table).
func checkIPCSchema(footer fbTable) error {
	s, ok, err := footer.tableField(1)
	if err != nil || !ok {
		return err
	}
	var g schemaGuard
	return g.schema(s)
}

// recordBatchVectors checks that a RecordBatch's vectors fit its message:
// 1 nodes and 2 buffers (16-byte structs), 4 variadicBufferCounts.
func recordBatchVectors(t fbTable) error {
	for _, v := range []struct{ field, size int }{{1, 16}, {2, 16}, {4, 8}} {
		if _, _, err := t.vectorField(v.field, v.size); err != nil {
			return fmt.Errorf("arrow record batch: %w", err)
		}
	}
	return nil
}

// schemaGuard counts what a schema declares as it is walked.
type schemaGuard struct {
	fields, metas int
}

// schema walks a Schema table: 1 fields, 2 custom_metadata, 3 features.
func (g *schemaGuard) schema(t fbTable) error {
	if err := g.metadata(t, 2); err != nil {
		return err
	}
	if _, _, err := t.vectorField(3, 8); err != nil {
		return fmt.Errorf("arrow schema features: %w", err)
	}
	return g.fieldVector(t, 1, 0)
}

// fieldVector walks the vector of Field tables in field i of t.
func (g *schemaGuard) fieldVector(t fbTable, i, depth int) error {
	start, n, err := t.vectorField(i, 4)
	if err != nil {
		return fmt.Errorf("arrow schema fields: %w", err)
	}
	if depth > maxSchemaDepth {
		return fmt.Errorf("arrow schema nests fields more than %d deep: %w", maxSchemaDepth, errBadIPC)
	}
	for k := 0; k < n; k++ {
		g.fields++
		if g.fields > maxSchemaFields {
			return fmt.Errorf("arrow schema declares more than %d fields: %w", maxSchemaFields, errBadIPC)
		}
		p := start + 4*k
		f, err := fbAt(t.buf, p+int(binary.LittleEndian.Uint32(t.buf[p:])))
		if err != nil {
			return fmt.Errorf("arrow schema field %d: %w", k, err)
		}
		// Field: 0 name, 1 nullable, 2 type_type, 3 type, 4 dictionary,
		// 5 children, 6 custom_metadata.
		if err := g.metadata(f, 6); err != nil {
			return err
		}
		if err := g.fieldVector(f, 5, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// metadata counts the custom_metadata vector in field i of t.
func (g *schemaGuard) metadata(t fbTable, i int) error {
	_, n, err := t.vectorField(i, 4)
	if err != nil {
		return fmt.Errorf("arrow custom metadata: %w", err)
	}
	g.metas += n
	if g.metas > maxSchemaMetadata {
		return fmt.Errorf("arrow metadata declares more than %d entries: %w", maxSchemaMetadata, errBadIPC)
	}
	return nil
}

// checkEncapsulated checks an encapsulated IPC message (0xFFFFFFFF, its
// length, its flatbuffer; or, before Arrow 0.15, the length and the
// flatbuffer), such as a FlightInfo's schema: the length must fit the
// bytes (arrow-go allocates it before reading) and the flatbuffer pass
// CheckIPCMessage.
func checkEncapsulated(b []byte) error {
	if len(b) >= 4 && binary.LittleEndian.Uint32(b) == 0xFFFFFFFF {
		b = b[4:]
	}
	if len(b) < 4 {
		return fmt.Errorf("arrow message of %d bytes: %w", len(b), errBadIPC)
	}
	n := int64(int32(binary.LittleEndian.Uint32(b)))
	if n < 0 || n > int64(len(b)-4) {
		return fmt.Errorf("arrow message says %d bytes, %d follow: %w", n, len(b)-4, errBadIPC)
	}
	return CheckIPCMessage(b[4 : 4+n])
}

// CheckedFlightStream returns r with every message checked by
// CheckIPCMessage before arrow-go's flight.NewRecordReader decodes it.
func CheckedFlightStream(r flight.DataStreamReader) flight.DataStreamReader {
	return checkedStream{r}
}

type checkedStream struct{ r flight.DataStreamReader }

func (c checkedStream) Recv() (*flight.FlightData, error) {
	fd, err := c.r.Recv()
	if err != nil {
		return nil, err
	}
	if err := CheckIPCMessage(fd.GetDataHeader()); err != nil {
		return nil, err
	}
	return fd, nil
}
