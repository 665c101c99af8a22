package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Parquet page types (parquet.thrift, PageType).
const (
	pageData       = 0
	pageIndex      = 1
	pageDictionary = 2
	pageDataV2     = 3
)

// pageHeader is what flatColumns needs of a Parquet page header
// (parquet.thrift, PageHeader with DataPageHeader, DataPageHeaderV2 or
// DictionaryPageHeader); the rest (statistics, CRC, index pages) is
// skipped.
type pageHeader struct {
	typ              int32
	uncompressedSize int32
	compressedSize   int32

	numValues   int32 // levels in a data page, values in a dictionary page
	encoding    int32 // of the values
	defEncoding int32 // of the definition levels, version 1

	defLen, repLen int32 // bytes of levels at the front, version 2
	compressed     bool  // version 2: whether the values are compressed
}

// errShortHeader is what parsePageHeader says of bytes that end within
// the header: more of the chunk is needed.
var errShortHeader = errors.New("page header cut short")

// parsePageHeader parses the page header at the start of b (Thrift's
// compact protocol) and returns it with its length in bytes.
func parsePageHeader(b []byte) (pageHeader, int, error) {
	r := compactReader{b: b}
	h := pageHeader{compressed: true}
	var seen int
	r.structFields(func(id int16, typ byte) {
		switch {
		case id == 1 && typ == ctI32:
			h.typ, seen = r.i32(), seen|1
		case id == 2 && typ == ctI32:
			h.uncompressedSize, seen = r.i32(), seen|2
		case id == 3 && typ == ctI32:
			h.compressedSize, seen = r.i32(), seen|4
		case id == 5 && typ == ctStruct: // DataPageHeader
			r.int32Fields([]*int32{1: &h.numValues, 2: &h.encoding, 3: &h.defEncoding}, 0, nil)
		case id == 7 && typ == ctStruct: // DictionaryPageHeader
			r.int32Fields([]*int32{1: &h.numValues, 2: &h.encoding}, 0, nil)
		case id == 8 && typ == ctStruct: // DataPageHeaderV2
			r.int32Fields([]*int32{1: &h.numValues, 4: &h.encoding, 5: &h.defLen, 6: &h.repLen}, 7, &h.compressed)
		default:
			r.skip(typ)
		}
	})
	if r.err != nil {
		return h, 0, r.err
	}
	if seen != 7 {
		return h, 0, fmt.Errorf("page header without its type or sizes")
	}
	if h.uncompressedSize < 0 || h.compressedSize < 0 || h.numValues < 0 || h.defLen < 0 || h.repLen < 0 {
		return h, 0, fmt.Errorf("page header with a negative size or count")
	}
	return h, r.pos, nil
}

// Thrift compact protocol types (as in a field header's low nibble).
const (
	ctStop   = 0
	ctTrue   = 1
	ctFalse  = 2
	ctByte   = 3
	ctI16    = 4
	ctI32    = 5
	ctI64    = 6
	ctDouble = 7
	ctBinary = 8
	ctList   = 9
	ctSet    = 10
	ctMap    = 11
	ctStruct = 12
)

// maxThriftDepth bounds nested structs and containers in what is
// skipped, so that a damaged header cannot recurse without end.
const maxThriftDepth = 16

// compactReader reads Thrift's compact protocol from bytes: page headers,
// and footers for indexFooter. The first error sticks: later reads return
// zeros.
type compactReader struct {
	b      []byte
	pos    int
	depth  int
	err    error
	header int // where the header of the field structFields is at begins
}

func (r *compactReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *compactReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail(errShortHeader)
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *compactReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	switch {
	case n == 0:
		r.fail(errShortHeader)
	case n < 0:
		r.fail(fmt.Errorf("page header: a varint overflows"))
	}
	r.pos += max(n, 0)
	return v
}

// i32 reads a zigzag varint.
func (r *compactReader) i32() int32 {
	v := r.uvarint()
	return int32(v>>1) ^ -int32(v&1)
}

// i64 reads a zigzag varint.
func (r *compactReader) i64() int64 {
	v := r.uvarint()
	return int64(v>>1) ^ -int64(v&1)
}

// structFields calls field for each field of the struct at the reader,
// which must read or skip the field's value, until the struct's end.
func (r *compactReader) structFields(field func(id int16, typ byte)) {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxThriftDepth {
		r.fail(fmt.Errorf("page header nested too deep"))
		return
	}
	var id int16
	for r.err == nil {
		header := r.pos
		h := r.byte()
		if h == ctStop || r.err != nil {
			return
		}
		if delta := int16(h >> 4); delta != 0 {
			id += delta
		} else {
			id = int16(r.i32())
		}
		r.header = header
		field(id, h&0x0f)
	}
}

// int32Fields reads the struct at the reader: its i32 field of id i into
// *into[i] where that is not nil, its boolean field flagID (when flag is
// not nil) into *flag, and past every other field.
func (r *compactReader) int32Fields(into []*int32, flagID int16, flag *bool) {
	r.structFields(func(id int16, typ byte) {
		switch {
		case typ == ctI32 && id >= 0 && int(id) < len(into) && into[id] != nil:
			*into[id] = r.i32()
		case flag != nil && id == flagID && (typ == ctTrue || typ == ctFalse):
			*flag = typ == ctTrue
		default:
			r.skip(typ)
		}
	})
}

// skip reads past a value of type typ.
func (r *compactReader) skip(typ byte) {
	switch typ {
	case ctTrue, ctFalse: // a field's value is in its header
	case ctByte:
		r.byte()
	case ctI16, ctI32, ctI64:
		r.uvarint()
	case ctDouble:
		r.bytes(8)
	case ctBinary:
		r.bytes(r.uvarint())
	case ctList, ctSet:
		h := r.byte()
		n := uint64(h >> 4)
		if n == 15 {
			n = r.uvarint()
		}
		r.elements(n, h&0x0f)
	case ctMap:
		n := r.uvarint()
		if n == 0 || r.err != nil {
			return
		}
		kv := r.byte()
		for i := uint64(0); i < n && r.err == nil; i++ {
			r.element(kv >> 4)
			r.element(kv & 0x0f)
		}
	case ctStruct:
		r.skipStruct()
	default:
		r.fail(fmt.Errorf("page header: unknown Thrift type %d", typ))
	}
}

// skipStruct reads past a struct: structFields skipping every field,
// without a call per field (indexFooter skips most of a footer's column
// chunk this way).
func (r *compactReader) skipStruct() {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxThriftDepth {
		r.fail(fmt.Errorf("page header nested too deep"))
		return
	}
	for r.err == nil {
		h := r.byte()
		if h == ctStop || r.err != nil {
			return
		}
		if h>>4 == 0 {
			r.i32() // the field's id, in full
		}
		r.skip(h & 0x0f)
	}
}

// elements skips n container elements of type typ.
func (r *compactReader) elements(n uint64, typ byte) {
	for i := uint64(0); i < n && r.err == nil; i++ {
		r.element(typ)
	}
}

// element skips one container element: booleans take a byte there.
func (r *compactReader) element(typ byte) {
	if typ == ctTrue || typ == ctFalse {
		r.byte()
		return
	}
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxThriftDepth {
		r.fail(fmt.Errorf("page header nested too deep"))
		return
	}
	r.skip(typ)
}

func (r *compactReader) bytes(n uint64) {
	if r.err != nil {
		return
	}
	if n > uint64(len(r.b)-r.pos) {
		r.fail(errShortHeader)
		return
	}
	r.pos += int(n)
}
