package feed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// parquetMagic ends a Parquet file whose footer is not encrypted.
var parquetMagic = []byte("PAR1")

// readFooter returns a Parquet file's footer: the Thrift-encoded
// FileMetaData before its length and the magic at the end of the file.
// It returns false for a file that does not end that way (an encrypted
// footer, or damage): arrow-go then reads the file's end itself and
// says what is wrong with it.
func readFooter(src io.ReaderAt, size int64) ([]byte, bool) {
	if size < 12 {
		return nil, false
	}
	var tail [8]byte
	if !readFull(src, tail[:], size-8) || !bytes.Equal(tail[4:], parquetMagic) {
		return nil, false
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 {
		return nil, false
	}
	footer := make([]byte, n)
	return footer, readFull(src, footer, size-8-n)
}

// readFull reports whether src's len(p) bytes at off were read into p
// (a ReaderAt may say io.EOF along with the last bytes of the file).
func readFull(src io.ReaderAt, p []byte, off int64) bool {
	n, err := src.ReadAt(p, off)
	return n == len(p) && (err == nil || errors.Is(err, io.EOF))
}

// FileMetaData and RowGroup fields (parquet.thrift) that thinFooter
// looks at or writes.
const (
	fileRowGroupsField  = 4
	fileEncryptionField = 8

	rowGroupColumnsField = 1
	rowGroupBytesField   = 2
	rowGroupRowsField    = 3
)

// errNotThinned stops thinFooter's reading once it knows it will not thin.
var errNotThinned = errors.New("footer not thinned")

// thinFooter returns footer (a FileMetaData) with every row group not in
// keep cut down to its byte size and row count, without column chunks,
// so that parsing it costs in proportion to the row groups a rank reads:
// arrow-go allocates every chunk's metadata and statistics as it parses
// (6-7 ms for 489 row groups of 17 columns), and every executor would
// otherwise parse them all to read its share. The row groups keep their
// places, so a split's row group numbers mean what they meant. It returns
// false when keep is every row group, when the footer is not one it
// understands (then the whole footer is parsed, and arrow-go judges it),
// or when it describes an encrypted file.
func thinFooter(footer []byte, keep []int) ([]byte, bool) {
	r := compactReader{b: footer}
	out := make([]byte, 0, len(footer)/4)
	copied, lists := 0, 0 // footer[:copied] is in out
	r.structFields(func(id int16, typ byte) {
		switch {
		case id == fileEncryptionField:
			r.fail(errNotThinned)
		case id == fileRowGroupsField && typ == ctList:
			lists++
			if !thinRowGroups(&r, footer, keep, &out, &copied) {
				r.fail(errNotThinned)
			}
		default:
			r.skip(typ)
		}
	})
	if lists != 1 || r.err != nil || r.pos != len(footer) {
		return nil, false
	}
	return append(out, footer[copied:]...), true
}

// thinRowGroups reads the list of row groups at r, appending to out the
// footer up to each row group left out and a stub in its place.
func thinRowGroups(r *compactReader, footer []byte, keep []int, out *[]byte, copied *int) bool {
	h := r.byte()
	n := uint64(h >> 4)
	if n == 15 {
		n = r.uvarint()
	}
	if r.err != nil || h&0x0f != ctStruct || n > uint64(len(footer)) {
		return false
	}
	kept := make([]bool, n)
	left := n // row groups not kept
	for _, rg := range keep {
		if rg < 0 || uint64(rg) >= n {
			return false
		}
		if !kept[rg] {
			kept[rg] = true
			left--
		}
	}
	if left == 0 {
		return false // nothing to thin: arrow-go reads the footer as it is
	}
	for i := range kept {
		start := r.pos
		var size, rows []byte // their zigzag varints, as they are
		r.structFields(func(id int16, typ byte) {
			at := r.pos
			r.skip(typ)
			switch {
			case id == rowGroupBytesField && typ == ctI64:
				size = footer[at:r.pos]
			case id == rowGroupRowsField && typ == ctI64:
				rows = footer[at:r.pos]
			}
		})
		if r.err != nil || size == nil || rows == nil {
			return false
		}
		if kept[i] {
			continue
		}
		// RowGroup{columns: [], total_byte_size, num_rows}: fields 1, 2
		// and 3, each header's id a delta of one from the one before.
		*out = append(*out, footer[*copied:start]...)
		*out = append(*out, rowGroupColumnsField<<4|ctList, 0<<4|ctStruct) // an empty list of structs
		*out = append(*out, (rowGroupBytesField-rowGroupColumnsField)<<4|ctI64)
		*out = append(*out, size...)
		*out = append(*out, (rowGroupRowsField-rowGroupBytesField)<<4|ctI64)
		*out = append(*out, rows...)
		*out = append(*out, ctStop)
		*copied = r.pos
	}
	return true
}

// thinMetaData returns the footer of the file src of size bytes, thinned
// to the row groups rowGroups (thinFooter), or nil when it cannot be
// thinned.
func thinMetaData(src io.ReaderAt, size int64, rowGroups []int) *metadata.FileMetaData {
	footer, ok := readFooter(src, size)
	if !ok {
		return nil
	}
	thin, ok := thinFooter(footer, rowGroups)
	if !ok {
		return nil
	}
	md, err := metadata.NewFileMetaData(thin, nil)
	if err != nil {
		return nil
	}
	md.SetSourceFileSize(size)
	return md
}
