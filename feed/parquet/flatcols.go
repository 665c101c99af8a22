package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// FlatColumns reads flat fixed-width columns straight from their pages:
// chunkPages finds and decompresses each page, and the values are copied
// from it into the batch's buffer when the page stores them plainly, or
// looked up in the chunk's dictionary when it stores dictionary indices
// (writers dictionary-encode a column until its dictionary grows too
// large, then store the rest of the chunk plainly).
//
// That is what pqarrow does for such a column too, except for the
// definition levels: it expands them to one int16 per value and then
// to a validity bitmap, even when the page holds no nulls, which is
// about a fifth of the decoding time of float columns (and every column
// of a DuckDB-written file is optional). Here a page whose levels are
// one run of "present" costs nothing beyond the copy, and other levels
// are read straight into a bitmap (bit-packed levels of a flat column
// are one already), which beats pqarrow on columns with nulls too.
//
// Batches cover the same rows as a pqarrow.RecordReader's with the same
// batch size and row groups: batchRows rows each, across row groups,
// until the last.
type FlatColumns struct {
	pf        *file.Reader
	src       io.ReaderAt // the file's bytes
	window    int         // read from src at once, at least (chunkPages)
	rowGroups []int
	schema    *arrow.Schema
	cols      []*flatColumn
	alloc     memory.Allocator
	// batchAlloc allocates the batches' values and validity: the
	// pipeline's batch memory when lending, else alloc.
	batchAlloc memory.Allocator
	lending    bool
	batchRows  int64
	left       int64 // rows not yet read
	rec        arrow.RecordBatch
	err        error
}

// flatColumn is one column of a flatColumns: where it is in its row
// groups, and what is left of its current page.
type flatColumn struct {
	leaf   int
	name   string
	typ    arrow.DataType
	width  int   // bytes per value in the file
	maxDef int16 // 0 (required) or 1 (optional)
	// narrow: the file's float64 values are read as float32, each
	// converted as it is taken from its page; outWidth is the bytes per
	// value in the batches.
	narrow   bool
	outWidth int

	rg    int         // index into rowGroups of the row group being read; -1 before the first
	pages *chunkPages // nil until the first page

	levels   int    // levels (rows) left in the page
	values   []byte // the page's values not yet read, when stored plainly
	valid    []byte // the page's validity bitmap, nil when every value is present
	validPos int    // bit in valid of the next level

	// pageLen is the length of the page's levels and values, which are
	// in a buffer of chunkPages' own when page is not nil (pageValues);
	// pageLevels is its levels (rows).
	pageLen    int
	pageLevels int
	page       *memory.Buffer

	// A page whose values are read from the file straight into the
	// batches' buffers (startDirect): where its values not yet read are.
	inFile   bool
	fileAt   int64
	fileLeft int64

	dict    []byte      // the chunk's dictionary, nil before its dictionary page
	encoded bool        // the page's values are dictionary indices
	indices dictIndices // the page's indices not yet read, when encoded
	idx     []uint32    // scratch for indices

	// A string column (strs) is read as an Arrow dictionary array: its
	// values are the indices, and its dictionary that of the chunk, or
	// those of the chunks the batch spans one after the other.
	strs        bool
	dictArr     arrow.Array   // the chunk's dictionary, for strs
	batchDicts  []arrow.Array // the dictionaries the batch's indices point into
	dictBase    uint32        // where dictArr starts in them
	dictInBatch bool          // dictArr is in batchDicts
}

// flatWidth is the byte width of a column flatColumns reads, or 0 when
// it does not read it: a top-level, unrepeated INT32, INT64, FLOAT or
// DOUBLE leaf that Arrow reads as the same-width integer or float, or a
// BYTE_ARRAY leaf read as a dictionary array of strings or binaries with
// int32 indices (its width is the indices').
func flatWidth(col *schemaColumn, typ arrow.DataType) int {
	if col.maxRep > 0 || col.maxDef > 1 || col.depth != 1 {
		return 0
	}
	switch {
	case col.physical == parquet.Types.ByteArray && dictOfStrings(typ):
		return 4
	case col.physical == parquet.Types.Int32 && (typ.ID() == arrow.INT32 || typ.ID() == arrow.UINT32):
		return 4
	case col.physical == parquet.Types.Float && typ.ID() == arrow.FLOAT32:
		return 4
	case col.physical == parquet.Types.Int64 && (typ.ID() == arrow.INT64 || typ.ID() == arrow.UINT64):
		return 8
	case col.physical == parquet.Types.Double && (typ.ID() == arrow.FLOAT64 || typ.ID() == arrow.FLOAT32):
		return 8 // as float32: narrowed as it is read (ReadOptions.Float32Features)
	}
	return 0
}

// dictOfStrings reports whether typ is a dictionary of strings or
// binaries with int32 indices, as pqarrow reads a dictionary-encoded
// string column.
func dictOfStrings(typ arrow.DataType) bool {
	dt, ok := typ.(*arrow.DictionaryType)
	return ok && dt.IndexType.ID() == arrow.INT32 && (dt.ValueType.ID() == arrow.STRING || dt.ValueType.ID() == arrow.BINARY)
}

// schemaColumn is what flatWidth needs of a Parquet leaf column.
type schemaColumn struct {
	physical       parquet.Type
	maxDef, maxRep int16
	depth          int // elements in its path
}

func leafColumn(md *metadata.FileMetaData, leaf int) *schemaColumn {
	c := md.Schema.Column(leaf)
	return &schemaColumn{physical: c.PhysicalType(), maxDef: c.MaxDefinitionLevel(), maxRep: c.MaxRepetitionLevel(), depth: len(c.ColumnPath())}
}

// flatChunks reports whether leaf's chunks in rowGroups are all stored
// as flatColumns reads them (PLAIN or dictionary-encoded values, RLE
// levels) and not encrypted; for a string column (strs), dictionary-
// encoded throughout, as their page statistics must say.
func flatChunks(md *metadata.FileMetaData, rowGroups []int, leaf int, strs bool) bool {
	for _, rg := range rowGroups {
		cc, err := md.RowGroup(rg).ColumnChunk(leaf)
		if err != nil || cc.CryptoMetadata() != nil {
			return false
		}
		if strs && !dictionaryOnly(cc) {
			return false
		}
		for _, enc := range cc.Encodings() {
			switch enc {
			case parquet.Encodings.Plain, parquet.Encodings.RLE, parquet.Encodings.PlainDict, parquet.Encodings.RLEDict:
			default:
				return false
			}
		}
	}
	return true
}

// dictionaryOnly reports whether a column chunk's data pages are all
// dictionary-encoded: by its page encoding statistics, or without them,
// by its list of encodings having no PLAIN (which the dictionary page's
// own encoding may be, so such chunks are left to pqarrow).
func dictionaryOnly(cc *metadata.ColumnChunkMetaData) bool {
	if !cc.HasDictionaryPage() {
		return false
	}
	if stats := cc.EncodingStats(); len(stats) > 0 {
		for _, st := range stats {
			if st.PageType.String() != "DICTIONARY_PAGE" && st.Encoding != parquet.Encodings.RLEDict && st.Encoding != parquet.Encodings.PlainDict {
				return false
			}
		}
		return true
	}
	return !slices.Contains(cc.Encodings(), parquet.Encodings.Plain)
}

// NewFlatColumns returns a reader of the leaves (with their Arrow
// fields) in rowGroups of the file src, batchRows rows a batch, reading
// at least window bytes of a column chunk at once. The batches' values
// and validity come from batchAlloc when it is not nil (batch memory),
// else from alloc like everything else.
func NewFlatColumns(pf *file.Reader, src io.ReaderAt, window int, rowGroups []int, leaves []int, fields []arrow.Field, alloc, batchAlloc memory.Allocator, batchRows int) *FlatColumns {
	p := &FlatColumns{pf: pf, src: src, window: window, rowGroups: rowGroups, schema: arrow.NewSchema(fields, nil), alloc: alloc,
		batchAlloc: batchAlloc, lending: batchAlloc != nil, batchRows: int64(batchRows)}
	if !p.lending {
		p.batchAlloc = alloc
	}
	for _, rg := range rowGroups {
		p.left += pf.MetaData().RowGroup(rg).NumRows()
	}
	for i, leaf := range leaves {
		lc := leafColumn(pf.MetaData(), leaf)
		c := &flatColumn{
			leaf: leaf, name: fields[i].Name, typ: fields[i].Type,
			width: flatWidth(lc, fields[i].Type), maxDef: lc.maxDef, rg: -1,
			strs: fields[i].Type.ID() == arrow.DICTIONARY,
		}
		c.outWidth = c.width
		if c.narrow = lc.physical == parquet.Types.Double && c.typ.ID() == arrow.FLOAT32; c.narrow {
			c.outWidth = 4
		}
		p.cols = append(p.cols, c)
	}
	return p
}

func (p *FlatColumns) Schema() *arrow.Schema          { return p.schema }
func (p *FlatColumns) RecordBatch() arrow.RecordBatch { return p.rec }
func (p *FlatColumns) Err() error                     { return p.err }

// Next reads the next batch; false at the end or on an error (Err).
func (p *FlatColumns) Next() bool {
	if p.rec != nil {
		p.rec.Release()
		p.rec = nil
	}
	if p.err != nil || p.left == 0 {
		return false
	}
	n := min(p.batchRows, p.left)
	arrs := make([]arrow.Array, 0, len(p.cols))
	defer func() {
		for _, a := range arrs {
			a.Release()
		}
	}()
	for _, c := range p.cols {
		a, err := p.readColumn(c, int(n))
		if err != nil {
			p.err = err
			return false
		}
		arrs = append(arrs, a)
	}
	p.left -= n
	p.rec = array.NewRecordBatch(p.schema, arrs, n)
	return true
}

// SeekToRow skips to row (counted over the reader's row groups) from
// the start; it must be called before the first Next.
func (p *FlatColumns) SeekToRow(row int64) error {
	if row < 0 || row > p.left {
		return fmt.Errorf("seek to row %d of %d", row, p.left)
	}
	for _, c := range p.cols {
		if err := p.fill(c, nil, nil, 0, int(row)); err != nil {
			return err
		}
	}
	p.left -= row
	return nil
}

// Release frees the batch and the columns' page buffers.
func (p *FlatColumns) Release() {
	if p.rec != nil {
		p.rec.Release()
		p.rec = nil
	}
	for _, c := range p.cols {
		if c.pages != nil {
			c.pages.release()
			c.pages = nil
		}
		c.setDictArray(nil)
		c.releaseBatchDicts()
	}
}

// readColumn reads the next n values of c into a new array.
func (p *FlatColumns) readColumn(c *flatColumn, n int) (arrow.Array, error) {
	// Batches going to batch memory take their one copy there (the feed
	// then sends them where they lie); slices of pages would be copied
	// when sent.
	if !p.lending {
		if values := c.pageValues(n); values != nil {
			defer values.Release()
			data := array.NewData(c.typ, n, []*memory.Buffer{nil, values}, nil, 0, 0)
			defer data.Release()
			return array.MakeFromData(data), nil
		}
	}
	values := memory.NewResizableBuffer(p.batchAlloc)
	defer values.Release()
	values.Resize(n * c.outWidth)
	var validity *memory.Buffer
	defer func() {
		if validity != nil {
			validity.Release()
		}
	}()
	c.releaseBatchDicts()
	if err := p.fill(c, values.Bytes(), &validity, 0, n); err != nil {
		return nil, err
	}
	nulls := 0
	if validity != nil {
		nulls = n - bitutil.CountSetBits(validity.Bytes(), 0, n)
	}
	if !c.strs {
		data := array.NewData(c.typ, n, []*memory.Buffer{validity, values}, nil, nulls, 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	}
	return p.dictionaryArray(c, n, validity, values, nulls)
}

// slicedPageBatches is how many batches a page must hold at least for
// pageValues to slice it: the part of a page that a batch spanning two
// pages copies stays held, unused, as long as the page's slices live (the
// epoch cache keeps them), at most a quarter of the page this way.
const slicedPageBatches = 4

// pageValues returns the next n values of c as a slice of the buffer its
// page was decompressed into, rather than a copy, when they are all there:
// stored plainly, none of them null, aligned to their width, in a page of
// slicedPageBatches such batches or more. The batch then holds the page's
// buffer until it is released (the epoch cache counts the page in full:
// heldBytes); chunkPages decompresses the next page into another.
func (c *flatColumn) pageValues(n int) *memory.Buffer {
	size := n * c.width
	if c.narrow || c.strs || c.encoded || c.inFile || c.valid != nil || c.levels < n || len(c.values) < size || c.pages == nil ||
		c.pageLevels < slicedPageBatches*n {
		return nil
	}
	at := c.pageLen - len(c.values)
	if at%c.width != 0 {
		return nil
	}
	if c.page == nil {
		if c.page = c.pages.sharePage(); c.page == nil {
			return nil
		}
	}
	c.values = c.values[size:]
	c.levels -= n
	return memory.SliceBuffer(c.page, at, size)
}

// dictionaryArray makes a string column's batch: the indices in values,
// into the dictionary of the chunk they were read from or, when the batch
// spans chunks, into their dictionaries one after the other.
func (p *FlatColumns) dictionaryArray(c *flatColumn, n int, validity, values *memory.Buffer, nulls int) (arrow.Array, error) {
	var dict arrow.Array
	switch len(c.batchDicts) {
	case 0: // nothing but nulls
		if c.dictArr == nil {
			return nil, columnError(c.name, -1, errors.New("no dictionary"))
		}
		dict = c.dictArr
		dict.Retain()
	case 1:
		dict = c.batchDicts[0]
		dict.Retain()
	default:
		var err error
		if dict, err = array.Concatenate(c.batchDicts, p.alloc); err != nil {
			return nil, fmt.Errorf("column %s: join the dictionaries of the row groups a batch spans: %w", c.name, err)
		}
	}
	defer dict.Release()
	c.releaseBatchDicts()
	data := array.NewData(c.typ, n, []*memory.Buffer{validity, values}, nil, nulls, 0)
	defer data.Release()
	data.SetDictionary(dict.Data())
	return array.MakeFromData(data), nil
}

// setDictArray sets the chunk's dictionary to a, releasing the one
// before (which the batch may still hold in batchDicts).
func (c *flatColumn) setDictArray(a arrow.Array) {
	if c.dictArr != nil {
		c.dictArr.Release()
	}
	c.dictArr, c.dictInBatch = a, false
}

// releaseBatchDicts forgets the dictionaries of the batch being read.
func (c *flatColumn) releaseBatchDicts() {
	for _, d := range c.batchDicts {
		d.Release()
	}
	c.batchDicts, c.dictBase, c.dictInBatch = c.batchDicts[:0], 0, false
}

// fill reads n values of c into dst from value at on, setting their bits
// in *validity, which it allocates at the first null (every earlier bit
// set). A nil dst skips the values.
func (p *FlatColumns) fill(c *flatColumn, dst []byte, validity **memory.Buffer, at, n int) error {
	for n > 0 {
		if c.levels == 0 {
			if err := p.nextPage(c); err != nil {
				return err
			}
			continue
		}
		k := min(n, c.levels)
		if dst != nil {
			if c.valid != nil && *validity == nil && bitutil.CountSetBits(c.valid, c.validPos, k) < k {
				total := len(dst) / c.outWidth
				*validity = memory.NewResizableBuffer(p.batchAlloc)
				(*validity).Resize(int(bitutil.BytesForBits(int64(total))))
				bitutil.SetBitsTo((*validity).Bytes(), 0, int64(total), true)
			}
			if err := c.take(dst[at*c.outWidth:(at+k)*c.outWidth], *validity, at, k); err != nil {
				return columnError(c.name, -1, err)
			}
		} else if err := c.take(nil, nil, 0, k); err != nil {
			return columnError(c.name, -1, err)
		}
		at += k
		n -= k
	}
	return nil
}

// take moves the next k levels of c's page into dst (k values wide; nil
// skips them) and their validity into the bitmap from bit at (nil when
// every value so far is present).
func (c *flatColumn) take(dst []byte, bitmap *memory.Buffer, at, k int) error {
	if c.valid == nil {
		if err := c.putValues(dst, k); err != nil {
			return err
		}
		c.levels -= k
		return nil
	}
	if bitmap != nil {
		bitutil.CopyBitmap(c.valid, c.validPos, k, bitmap.Bytes(), at)
	}
	for i := 0; i < k; {
		if !bitutil.BitIsSet(c.valid, c.validPos+i) {
			if dst != nil {
				clear(dst[i*c.outWidth : (i+1)*c.outWidth])
			}
			i++
			continue
		}
		j := i + 1
		for j < k && bitutil.BitIsSet(c.valid, c.validPos+j) {
			j++
		}
		var out []byte
		if dst != nil {
			out = dst[i*c.outWidth : j*c.outWidth]
		}
		if err := c.putValues(out, j-i); err != nil {
			return err
		}
		i = j
	}
	c.validPos += k
	c.levels -= k
	return nil
}

// putValues moves the page's next n present values into dst (n values
// wide; nil skips them): copied when the page stores them plainly, looked
// up in the chunk's dictionary when it stores indices.
func (c *flatColumn) putValues(dst []byte, n int) error {
	if c.inFile {
		return c.readValues(dst, n)
	}
	if !c.encoded {
		if len(c.values) < n*c.width {
			return fmt.Errorf("page holds fewer values than its levels say")
		}
		switch {
		case dst == nil:
		case c.narrow:
			NarrowFloats(arrow.Float32Traits.CastFromBytes(dst)[:n], arrow.Float64Traits.CastFromBytes(c.values[:n*8]))
		default:
			copy(dst, c.values[:n*c.width])
		}
		c.values = c.values[n*c.width:]
		return nil
	}
	if c.strs && dst != nil {
		return c.putIndices(dst, n)
	}
	if cap(c.idx) < n {
		c.idx = make([]uint32, n)
	}
	idx := c.idx[:n]
	if err := c.indices.next(idx); err != nil {
		return err
	}
	if dst == nil {
		return nil
	}
	if c.narrow {
		return gatherNarrow(arrow.Float32Traits.CastFromBytes(dst)[:n], arrow.Float64Traits.CastFromBytes(c.dict), idx)
	}
	return gather(dst, c.dict, idx, c.width)
}

// readValues reads the page's next n values from the file into dst (n
// values wide; nil skips them).
func (c *flatColumn) readValues(dst []byte, n int) error {
	size := int64(n * c.width)
	if size > c.fileLeft {
		return fmt.Errorf("page holds fewer values than its levels say")
	}
	if dst != nil {
		if err := ReadAt(c.pages.src, dst[:size], c.fileAt); err != nil {
			return err
		}
	}
	c.fileAt += size
	c.fileLeft -= size
	return nil
}

// putIndices writes a string column's next n indices into dst, shifted
// to where the chunk's dictionary starts among the batch's.
func (c *flatColumn) putIndices(dst []byte, n int) error {
	if !c.dictInBatch {
		var base int
		for _, d := range c.batchDicts {
			base += d.Len()
		}
		c.dictArr.Retain()
		c.batchDicts = append(c.batchDicts, c.dictArr)
		c.dictBase, c.dictInBatch = uint32(base), true
	}
	out := asWords[uint32](dst)[:n]
	if err := c.indices.next(out); err != nil {
		return err
	}
	size := uint32(c.dictArr.Len())
	for i, x := range out {
		if x >= size {
			return fmt.Errorf("dictionary index %d of a dictionary of %d", x, size)
		}
		out[i] = x + c.dictBase
	}
	return nil
}

// gather writes dict's values at idx (each width bytes) into dst.
func gather(dst, dict []byte, idx []uint32, width int) error {
	switch width {
	case 4:
		return gatherDict(asWords[uint32](dst), asWords[uint32](dict), idx)
	case 8:
		return gatherDict(asWords[uint64](dst), asWords[uint64](dict), idx)
	}
	return fmt.Errorf("values of %d bytes", width)
}

// gatherNarrow writes dict's values at idx into dst as float32, refusing
// an index past the dictionary's end.
func gatherNarrow(dst []float32, dict []float64, idx []uint32) error {
	for i, x := range idx {
		if int(x) >= len(dict) {
			return fmt.Errorf("dictionary index %d of a dictionary of %d", x, len(dict))
		}
		dst[i] = float32(dict[x])
	}
	return nil
}

// NarrowFloats writes src into dst as float32.
func NarrowFloats(dst []float32, src []float64) {
	for i, v := range src[:len(dst)] {
		dst[i] = float32(v)
	}
}

// gatherDict writes dict's values at idx into dst, refusing an index
// past the dictionary's end.
func gatherDict[T uint32 | uint64](dst, dict []T, idx []uint32) error {
	for i, x := range idx {
		if int(x) >= len(dict) {
			return fmt.Errorf("dictionary index %d of a dictionary of %d", x, len(dict))
		}
		dst[i] = dict[x]
	}
	return nil
}

// nextPage moves c to its next data page, going on to the next row
// group's column chunk when the current one ends.
func (p *FlatColumns) nextPage(c *flatColumn) error {
	for {
		if c.rg >= 0 {
			h, data, err := c.pages.next()
			if err == nil && h.typ == pageDictionary {
				err = c.setDictionary(h, data)
				if err == nil {
					continue
				}
			}
			if err == nil {
				if at, size, ok := c.pages.deferred(); ok {
					return c.startDirect(h, data, at, size)
				}
				return c.startPage(h, data)
			}
			if !errors.Is(err, io.EOF) {
				return columnError(c.name, p.rowGroups[c.rg], err)
			}
		}
		if c.rg+1 >= len(p.rowGroups) {
			return columnError(c.name, -1, io.ErrUnexpectedEOF)
		}
		c.rg++
		c.dict = c.dict[:0:0]
		c.setDictArray(nil)
		cc, err := p.pf.MetaData().RowGroup(p.rowGroups[c.rg]).ColumnChunk(c.leaf)
		if err != nil {
			return columnError(c.name, p.rowGroups[c.rg], err)
		}
		start := ChunkStart(cc)
		if c.pages == nil {
			c.pages = newChunkPages(p.src, p.window, p.alloc)
		}
		if err := c.pages.reset(start, cc.TotalCompressedSize(), cc.Compression()); err != nil {
			return columnError(c.name, p.rowGroups[c.rg], err)
		}
	}
}

// setDictionary keeps the values of the chunk's dictionary page.
func (c *flatColumn) setDictionary(h pageHeader, data []byte) error {
	if h.encoding != int32(parquet.Encodings.Plain) && h.encoding != int32(parquet.Encodings.PlainDict) {
		return fmt.Errorf("a dictionary page encoded %s", parquet.Encoding(h.encoding))
	}
	if c.strs {
		a, err := byteArrays(c.typ.(*arrow.DictionaryType).ValueType, int(h.numValues), data)
		if err != nil {
			return err
		}
		c.setDictArray(a)
		c.dict = c.dict[:0]
		return nil
	}
	size := int(h.numValues) * c.width
	if size > len(data) {
		return fmt.Errorf("a dictionary page of %d bytes says it holds %d values", len(data), h.numValues)
	}
	c.dict = append(c.dict[:0], data[:size]...)
	return nil
}

// startDirect makes the data page with header h, whose body of size
// bytes chunkPages left in the file at at, c's current page. prefix is
// the body's first bytes. When they hold the page's levels and the page
// has no nulls, its values are read from the file straight into the
// batches' buffers as they are taken, saving a copy; otherwise the body
// is read and the page started like any other.
func (c *flatColumn) startDirect(h pageHeader, prefix []byte, at int64, size int) error {
	if err := c.startPage(h, prefix); err == nil && !c.encoded && c.valid == nil && !c.narrow {
		levels := len(prefix) - len(c.values)
		c.values, c.inFile, c.fileAt, c.fileLeft = nil, true, at+int64(levels), int64(size-levels)
		return nil
	}
	data, err := c.pages.load()
	if err != nil {
		return columnError(c.name, -1, err)
	}
	return c.startPage(h, data)
}

// startPage makes the page with header h and bytes data (levels and
// values) c's current page: its levels read, its values found.
func (c *flatColumn) startPage(h pageHeader, data []byte) error {
	pageLen := len(data)
	switch h.encoding {
	case int32(parquet.Encodings.Plain):
		c.encoded = false
	case int32(parquet.Encodings.RLEDict), int32(parquet.Encodings.PlainDict):
		if len(c.dict) == 0 && c.dictArr == nil {
			return columnError(c.name, -1, errors.New("a dictionary-encoded page before its chunk's dictionary"))
		}
		c.encoded = true
	default:
		return columnError(c.name, -1, fmt.Errorf("a page encoded %s in a chunk whose metadata says PLAIN or dictionary", parquet.Encoding(h.encoding)))
	}
	if c.strs && !c.encoded {
		return columnError(c.name, -1, errors.New("a page stored plainly in a chunk whose metadata says dictionary"))
	}
	levels := int(h.numValues)
	var defs []byte
	switch h.typ {
	case pageData:
		if c.maxDef > 0 {
			if h.defEncoding != int32(parquet.Encodings.RLE) {
				return columnError(c.name, -1, fmt.Errorf("definition levels encoded %s", parquet.Encoding(h.defEncoding)))
			}
			if len(data) < 4 {
				return columnError(c.name, -1, errors.New("a data page too short for its levels"))
			}
			size := int(binary.LittleEndian.Uint32(data))
			if size > len(data)-4 {
				return columnError(c.name, -1, errors.New("a data page too short for its levels"))
			}
			defs, data = data[4:4+size], data[4+size:]
		}
	case pageDataV2:
		rep, def := int(h.repLen), int(h.defLen)
		if rep+def > len(data) {
			return columnError(c.name, -1, errors.New("a data page too short for its levels"))
		}
		defs, data = data[rep:rep+def], data[rep+def:]
		if c.maxDef == 0 {
			defs = nil
		}
	}
	c.levels, c.values, c.valid, c.validPos, c.inFile = levels, data, nil, 0, false
	c.pageLen, c.pageLevels, c.page = pageLen, levels, nil
	if c.encoded {
		if err := c.indices.reset(data); err != nil {
			return columnError(c.name, -1, err)
		}
		c.values = nil
	}
	if defs == nil {
		return nil
	}
	valid, err := readValidity(defs, levels)
	if err != nil {
		return columnError(c.name, -1, fmt.Errorf("definition levels: %w", err))
	}
	c.valid = valid
	return nil
}

// readValidity reads n definition levels of a flat optional column (bit
// width 1, RLE/bit-packed hybrid) as a validity bitmap. It returns nil
// when they are one run of 1s: every value present.
func readValidity(defs []byte, n int) ([]byte, error) {
	if repeated, count, v, _, err := hybridRun(defs, 1); err == nil && repeated && count >= uint64(n) && v&1 == 1 {
		return nil, nil
	}
	bitmap := make([]byte, bitutil.BytesForBits(int64(n)))
	pos := 0
	for pos < n {
		repeated, count, v, rest, err := hybridRun(defs, 1)
		if err != nil {
			return nil, fmt.Errorf("%w at level %d of %d", err, pos, n)
		}
		defs = rest
		if repeated {
			run := int(min(count, uint64(n-pos)))
			if v&1 == 1 {
				bitutil.SetBitsTo(bitmap, int64(pos), int64(run), true)
			}
			pos += run
			continue
		}
		// count groups of 8 levels, one byte each at bit width 1
		if count > uint64(len(defs)) {
			return nil, fmt.Errorf("bit-packed levels cut short at level %d of %d", pos, n)
		}
		groups := int(count)
		k := min(groups*8, n-pos)
		bitutil.CopyBitmap(defs, 0, k, bitmap, pos)
		defs = defs[groups:]
		pos += k
	}
	return bitmap, nil
}

// FlatFields reports, for each selected field (the names sel, whose
// leaves are fieldLeaves), whether FlatColumns reads it: a flat
// fixed-width column (flatWidth) whose chunks in rowGroups it can read
// (flatChunks).
func FlatFields(pf *file.Reader, rowGroups []int, fieldLeaves [][]int, fileSchema *arrow.Schema, sel []string) []bool {
	flat := make([]bool, len(fieldLeaves))
	md := pf.MetaData()
	if md.WriterVersion().LessThan(metadata.Parquet816FixedVersion) {
		// Such writers got column chunk sizes wrong, which arrow-go
		// makes up for.
		return flat
	}
	for i, leaves := range fieldLeaves {
		if len(leaves) != 1 {
			continue
		}
		typ := fileSchema.Field(fileSchema.FieldIndices(sel[i])[0]).Type
		flat[i] = flatWidth(leafColumn(md, leaves[0]), typ) > 0 && flatChunks(md, rowGroups, leaves[0], typ.ID() == arrow.DICTIONARY)
	}
	return flat
}

// byteArrays reads n PLAIN byte arrays (each a 4-byte little-endian
// length and its bytes) as an Arrow array of typ, string or binary.
func byteArrays(typ arrow.DataType, n int, b []byte) (arrow.Array, error) {
	offsets := make([]int32, n+1)
	data := make([]byte, 0, len(b))
	for i := range n {
		if len(b) < 4 {
			return nil, fmt.Errorf("a dictionary page cut short at value %d of %d", i, n)
		}
		size := binary.LittleEndian.Uint32(b)
		if uint64(size) > uint64(len(b)-4) {
			return nil, fmt.Errorf("a dictionary page cut short at value %d of %d", i, n)
		}
		data = append(data, b[4:4+size]...)
		b = b[4+size:]
		offsets[i+1] = int32(len(data))
	}
	d := array.NewData(typ, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)), memory.NewBufferBytes(data)}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d), nil
}
