package parquet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// parquetMagic ends a Parquet file whose footer is not encrypted.
var parquetMagic = []byte("PAR1")

// footerTail is how much of a file's end readFooter reads at first: the
// whole footer of most files, with one read (a round trip on HDFS).
const footerTail = 64 << 10

// ReadFooter returns a Parquet file's footer: the Thrift-encoded
// FileMetaData before its length and the magic at the end of the file.
// It returns false for a file that does not end that way (an encrypted
// footer, or damage): arrow-go then reads the file's end itself and
// says what is wrong with it.
func ReadFooter(src io.ReaderAt, size int64) ([]byte, bool) {
	if size < 12 {
		return nil, false
	}
	tail := make([]byte, min(size, footerTail))
	if !readFull(src, tail, size-int64(len(tail))) || !bytes.Equal(tail[len(tail)-4:], parquetMagic) {
		return nil, false
	}
	n := int64(binary.LittleEndian.Uint32(tail[len(tail)-8:]))
	switch {
	case n > size-12:
		return nil, false
	case n <= int64(len(tail))-8:
		return tail[int64(len(tail))-8-n : len(tail)-8], true
	}
	footer := make([]byte, n)
	return footer, readFull(src, footer, size-8-n)
}

// readFull reports whether src's len(p) bytes at off were read into p.
func readFull(src io.ReaderAt, p []byte, off int64) bool { return ReadAt(src, p, off) == nil }

// ReadAt reads src's len(p) bytes at off into p, or says why it could
// not: a ReaderAt may say io.EOF along with the last bytes of the file,
// which is no error, and a short read without an error is one.
func ReadAt(src io.ReaderAt, p []byte, off int64) error {
	n, err := src.ReadAt(p, off)
	if n == len(p) && (err == nil || errors.Is(err, io.EOF)) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %d bytes at offset %d: %w", len(p), off, err)
}

// FileMetaData, RowGroup, ColumnChunk and ColumnMetaData fields
// (parquet.thrift) that indexFooter looks at or writes.
const (
	fileRowGroupsField  = 4
	fileEncryptionField = 8

	rowGroupColumnsField = 1
	rowGroupBytesField   = 2
	rowGroupRowsField    = 3

	chunkMetaDataField = 3

	metaCompressedSizeField       = 7
	metaDataPageField             = 9
	metaDictionaryPageField       = 11
	metaStatisticsField           = 12
	metaSizeStatisticsField       = 16
	metaGeospatialStatisticsField = 17
)

// errNotIndexed stops indexFooter's reading once it knows it will not
// index the footer.
var errNotIndexed = errors.New("footer not indexed")

// FooterIndex is a Parquet footer (a FileMetaData) read once, without
// allocating per field, to be parsed for less: arrow-go allocates every
// column chunk's metadata and statistics as it parses (6-7 ms for 489
// row groups of 17 columns), and planning and every executor would
// otherwise pay for all of it.
//
// lean is the footer without the statistics of its column chunks (min
// and max values, null counts, size and geospatial statistics), which
// only a reader that skips row groups by value looks at, and which are
// two fifths of what parsing a footer costs. thin cuts it further, to
// some of its row groups.
type FooterIndex struct {
	lean   []byte
	groups []groupSpan
}

// groupSpan is one row group of a footerIndex.
type groupSpan struct {
	start, end  int    // its bytes in lean
	size, rows  []byte // its total_byte_size and num_rows, zigzag varints as they are
	numRows     int64
	off, length int64 // where its column chunks are in the file; length 0: unknown
}

// IndexFooter reads footer. It returns false when the footer is not one
// it understands (then it is parsed whole, and arrow-go judges it), or
// when it describes an encrypted file.
func IndexFooter(footer []byte) (*FooterIndex, bool) {
	t := footerThinner{r: compactReader{b: footer}, footer: footer, out: make([]byte, 0, len(footer))}
	r := &t.r
	lists := 0
	r.structFields(func(id int16, typ byte) {
		switch {
		case id == fileEncryptionField:
			r.fail(errNotIndexed)
		case id == fileRowGroupsField && typ == ctList:
			lists++
			if !t.rowGroups() {
				r.fail(errNotIndexed)
			}
		default:
			r.skip(typ)
		}
	})
	if lists != 1 || r.err != nil || r.pos != len(footer) {
		return nil, false
	}
	return &FooterIndex{lean: append(t.out, footer[t.copied:]...), groups: t.groups}, true
}

// Thin returns the lean footer with every row group not in keep (nil:
// none is left out) cut down to its byte size and row count, without
// column chunks: each executor of a job parses its share of a large
// footer. The row groups keep their places, so a split's row group
// numbers mean what they meant. It returns false for a row group the
// footer does not have.
func (x *FooterIndex) Thin(keep []int) ([]byte, bool) {
	if keep == nil {
		return x.lean, true
	}
	kept := make([]bool, len(x.groups))
	for _, rg := range keep {
		if rg < 0 || rg >= len(kept) {
			return nil, false
		}
		kept[rg] = true
	}
	out := make([]byte, 0, len(x.lean)/4)
	copied := 0 // x.lean[:copied] is in out
	for i, g := range x.groups {
		if kept[i] {
			continue
		}
		// RowGroup{columns: [], total_byte_size, num_rows}: fields 1, 2
		// and 3, each header's id a delta of one from the one before.
		out = append(out, x.lean[copied:g.start]...)
		out = append(out, rowGroupColumnsField<<4|ctList, 0<<4|ctStruct) // an empty list of structs
		out = append(out, (rowGroupBytesField-rowGroupColumnsField)<<4|ctI64)
		out = append(out, g.size...)
		out = append(out, (rowGroupRowsField-rowGroupBytesField)<<4|ctI64)
		out = append(out, g.rows...)
		out = append(out, ctStop)
		copied = g.end
	}
	return append(out, x.lean[copied:]...), true
}

// footerThinner writes a footer with parts of it taken out as it reads
// it: out holds footer[:copied] with those parts taken out.
type footerThinner struct {
	r      compactReader
	footer []byte
	out    []byte
	copied int
	groups []groupSpan
}

// replace takes footer[from:to] out, putting b in its place.
func (t *footerThinner) replace(from, to int, b ...byte) {
	t.out = append(t.out, t.footer[t.copied:from]...)
	t.out = append(t.out, b...)
	t.copied = to
}

// outPos is where footer[pos] (pos >= copied) lands in the output.
func (t *footerThinner) outPos(pos int) int { return len(t.out) + pos - t.copied }

// rowGroups reads the list of row groups at the reader.
func (t *footerThinner) rowGroups() bool {
	r := &t.r
	n, ok := t.structList()
	if !ok {
		return false
	}
	t.groups = make([]groupSpan, n)
	for i := range t.groups {
		g := &t.groups[i]
		g.start = t.outPos(r.pos)
		r.structFields(func(id int16, typ byte) {
			at := r.pos
			switch {
			case id == rowGroupColumnsField && typ == ctList:
				if !t.columnChunks(g) {
					r.fail(errNotIndexed)
				}
			case id == rowGroupBytesField && typ == ctI64:
				r.skip(typ)
				g.size = t.footer[at:r.pos]
			case id == rowGroupRowsField && typ == ctI64:
				g.numRows = r.i64()
				g.rows = t.footer[at:r.pos]
			default:
				r.skip(typ)
			}
		})
		if r.err != nil || g.size == nil || g.rows == nil {
			return false
		}
		g.end = t.outPos(r.pos)
	}
	return true
}

// structList reads the header of a list of structs, returning its length.
func (t *footerThinner) structList() (uint64, bool) {
	r := &t.r
	h := r.byte()
	n := uint64(h >> 4)
	if n == 15 {
		n = r.uvarint()
	}
	return n, r.err == nil && h&0x0f == ctStruct && n <= uint64(len(t.footer))
}

// columnChunks reads a row group's list of column chunks, noting in g
// where they are in the file and taking each one's statistics out.
func (t *footerThinner) columnChunks(g *groupSpan) bool {
	r := &t.r
	n, ok := t.structList()
	span := NewChunkSpan()
	for i := uint64(0); ok && i < n && r.err == nil; i++ {
		plain := false // whether the chunk has its metadata unencrypted
		r.structFields(func(id int16, typ byte) {
			if id != chunkMetaDataField || typ != ctStruct {
				r.skip(typ)
				return
			}
			plain = true
			span.Add(t.chunkMetaData())
		})
		ok = ok && plain
	}
	g.off, g.length = span.Bytes()
	return ok && r.err == nil
}

// chunkMetaData reads a ColumnMetaData, taking its statistics out, and
// returns where the chunk's bytes begin in the file (chunkStart) and how
// many there are. A field header holds its id as a delta from the field
// before it, so the headers after a field taken out are written anew.
func (t *footerThinner) chunkMetaData() (start, size int64) {
	r := &t.r
	var last int16       // the id of the last field kept
	var data, dict int64 // where its data pages and dictionary page are
	hasDict, cut := false, false
	r.structFields(func(id int16, typ byte) {
		header, value := r.header, r.pos
		switch {
		case id == metaStatisticsField || id == metaSizeStatisticsField || id == metaGeospatialStatisticsField:
			r.skip(typ)
			t.replace(header, r.pos)
			cut = true
			return
		case id == metaCompressedSizeField && typ == ctI64:
			size = r.i64()
		case id == metaDataPageField && typ == ctI64:
			data = r.i64()
		case id == metaDictionaryPageField && typ == ctI64:
			dict, hasDict = r.i64(), true
		default:
			r.skip(typ)
		}
		if cut {
			t.replace(header, value, fieldHeader(id, last, typ)...)
		}
		last = id
	})
	return FirstPage(data, dict, hasDict), size
}

// fieldHeader returns the compact-protocol header of field id of type typ
// after the field last.
func fieldHeader(id, last int16, typ byte) []byte {
	if d := id - last; d > 0 && d <= 15 {
		return []byte{byte(d)<<4 | typ}
	}
	return binary.AppendUvarint([]byte{typ}, uint64(uint16(id<<1^id>>15)))
}

// ThinMetaData returns the footer of the file src of size bytes, lean
// and thinned to the row groups keep (FooterIndex.Thin), or nil when it
// cannot be read that way.
func ThinMetaData(src io.ReaderAt, size int64, keep []int) *metadata.FileMetaData {
	footer, ok := ReadFooter(src, size)
	if !ok {
		return nil
	}
	x, ok := IndexFooter(footer)
	if !ok {
		return nil
	}
	thin, ok := x.Thin(keep)
	if !ok {
		return nil
	}
	return ParseFooter(thin, size)
}

// ParseFooter parses a footer of a file of size bytes, or returns nil
// (also when the decoder panics on it: the caller then parses the file's
// own footer, whose damage is reported naming the file).
func ParseFooter(footer []byte, size int64) (md *metadata.FileMetaData) {
	defer func() {
		if recover() != nil {
			md = nil
		}
	}()
	md, err := metadata.NewFileMetaData(footer, nil)
	if err != nil {
		return nil
	}
	md.SetSourceFileSize(size)
	return md
}

// Lean returns the footer without its column chunks' statistics.
func (x *FooterIndex) Lean() []byte { return x.lean }

// RowGroup is where one row group of an indexed footer is: its rows, and
// the bytes of its column chunks in the file (Length 0: unknown).
type RowGroup struct {
	Rows        int64
	Off, Length int64
}

// RowGroups returns the row groups of the indexed footer, in order.
func (x *FooterIndex) RowGroups() []RowGroup {
	out := make([]RowGroup, len(x.groups))
	for i, g := range x.groups {
		out[i] = RowGroup{Rows: g.numRows, Off: g.off, Length: g.length}
	}
	return out
}
