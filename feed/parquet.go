package feed

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	feedpq "github.com/spindle-ml/spindle/feed/parquet"
	"github.com/spindle-ml/spindle/fsys"
)

// parquetBufferSize is the read buffer of each column chunk being read.
// Page headers are read through it; page bodies larger than it are read
// straight into the decoder's (pooled) page buffer.
const parquetBufferSize = 16 << 10

// openParquetFile reads a Parquet file's footer. The reader must not be
// closed (that would close f); the caller closes f.
// A non-nil md is the file's footer, parsed before, which is then not
// read again. String and binary columns are read as Arrow dictionary
// arrays (see dictLeaves): those the planned schema has as dictionaries
// or, without a plan, those the file dictionary-encodes.
func openParquetFile(f parquet.ReaderAtSeeker, uri string, alloc memory.Allocator, batchRows int, md *metadata.FileMetaData, planned *arrow.Schema) (_ *file.Reader, _ *pqarrow.FileReader, err error) {
	defer recoverDecode(uri, "Parquet file", &err)
	props := parquet.NewReaderProperties(alloc)
	// Buffered: arrow-go's unbuffered mode reads a whole column chunk
	// into a fresh buffer (zeroed by the Go runtime, then collected)
	// and copies every page out of it. Buffered, a page body goes from
	// the file straight into a page buffer from alloc. Remote files get
	// whole-chunk reads all the same, from a chunkCache.
	props.BufferedStreamEnabled = true
	props.BufferSize = parquetBufferSize
	opts := []file.ReadOption{file.WithReadProps(props)}
	if md != nil {
		opts = append(opts, file.WithMetadata(md))
	}
	pf, err := file.NewParquetReader(f, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s is not a Parquet file or is damaged: %w", ErrInput, uri, err)
	}
	arrowProps := pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}
	for _, leaf := range dictLeaves(pf.MetaData(), planned) {
		arrowProps.SetReadDict(leaf, true)
	}
	arrowAlloc := alloc
	if nestedColumns(pf.MetaData()) {
		arrowAlloc = zeroedAllocator{alloc}
	}
	fr, err := pqarrow.NewFileReader(pf, arrowProps, arrowAlloc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: read the Parquet schema: %w", ErrInput, uri, err)
	}
	return pf, fr, nil
}

// nestedColumns reports whether a file has columns inside lists, maps or
// structs.
func nestedColumns(md *metadata.FileMetaData) bool {
	for c := 0; c < md.Schema.NumColumns(); c++ {
		if col := md.Schema.Column(c); col.MaxRepetitionLevel() > 0 || len(col.ColumnPath()) > 1 {
			return true
		}
	}
	return false
}

// dictLeaves returns the leaf columns to read as Arrow dictionary arrays:
// top-level string and binary columns (BYTE_ARRAY, not in a list) that,
// with a planned schema, it has as dictionaries, or without one, that
// the file dictionary-encodes (dictEncoded). Decoding such a column to
// plain strings copies every value out of the dictionary, for every row;
// as a dictionary array only the indices are decoded, and the dictionary
// is shared by the batches of a row group. Pages stored plainly are read
// into a dictionary all the same (arrow-go builds one), so the batches'
// types follow the plan whatever each file does.
func dictLeaves(md *metadata.FileMetaData, planned *arrow.Schema) []int {
	var leaves []int
	for c := 0; c < md.Schema.NumColumns(); c++ {
		col := md.Schema.Column(c)
		if !dictCandidate(col) {
			continue
		}
		if planned != nil {
			if i := planned.FieldIndices(col.Name()); len(i) == 1 && planned.Field(i[0]).Type.ID() == arrow.DICTIONARY {
				leaves = append(leaves, c)
			}
			continue
		}
		if dictEncoded(md, c) {
			leaves = append(leaves, c)
		}
	}
	return leaves
}

// dictCandidate reports whether leaf column col may be read as a
// dictionary array: a top-level string or binary column.
func dictCandidate(col *schema.Column) bool {
	return col.PhysicalType() == parquet.Types.ByteArray && col.MaxRepetitionLevel() == 0 && len(col.ColumnPath()) == 1
}

// hasDictCandidates reports whether a file has a dictCandidate column.
func hasDictCandidates(md *metadata.FileMetaData) bool {
	for c := 0; c < md.Schema.NumColumns(); c++ {
		if dictCandidate(md.Schema.Column(c)) {
			return true
		}
	}
	return false
}

// dictEncoded reports whether leaf column c is dictionary-encoded in row
// groups holding at least half the file's rows. A chunk counts when it
// has a dictionary page and no data page stored plainly (a writer falls
// back to plain pages when the dictionary grows too large: the values are
// then mostly distinct, and a dictionary would not pay). Writers may
// store a small last row group plainly, which does not change the answer.
func dictEncoded(md *metadata.FileMetaData, c int) bool {
	var dictRows, rows int64
	for rg := 0; rg < md.NumRowGroups(); rg++ {
		rgmd := md.RowGroup(rg)
		rows += rgmd.NumRows()
		cc, err := rgmd.ColumnChunk(c)
		if err != nil || !cc.HasDictionaryPage() {
			continue
		}
		plain := false
		for _, st := range cc.EncodingStats() {
			plain = plain || (st.Encoding == parquet.Encodings.Plain && st.PageType.String() != "DICTIONARY_PAGE")
		}
		if !plain {
			dictRows += rgmd.NumRows()
		}
	}
	return dictRows > 0 && 2*dictRows >= rows
}

// inspectParquet returns a Parquet file's schema and its row groups. It
// reads them from the footer's index (feedpq.FooterIndex), parsing only the
// schema, unless a string column's type depends on how every row group
// stores it (dictLeaves); a footer it cannot index is parsed whole.
func inspectParquet(f fsys.File, uri string) (_ *arrow.Schema, _ []unit, err error) {
	defer recoverDecode(uri, "Parquet file", &err)
	var md *metadata.FileMetaData
	var units []unit
	if footer, ok := feedpq.ReadFooter(f, f.Size()); ok {
		if x, ok := feedpq.IndexFooter(footer); ok {
			bare, _ := x.Thin([]int{}) // every row group without its column chunks
			if md = feedpq.ParseFooter(bare, f.Size()); md != nil && hasDictCandidates(md) {
				md = feedpq.ParseFooter(x.Lean(), f.Size())
			}
			units = rowGroupUnits(x)
		}
	}
	pf, fr, err := openParquetFile(f, uri, memory.DefaultAllocator, 0, md, nil)
	if err != nil {
		return nil, nil, err
	}
	schema, err := fr.Schema()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: convert the Parquet schema to Arrow: %w", ErrInput, uri, err)
	}
	if md == nil {
		if units, err = unitsOf(pf.MetaData(), uri); err != nil {
			return nil, nil, err
		}
	}
	return cleanSchema(schema), units, nil
}

// rowGroupUnits returns the row groups of an indexed footer.
func rowGroupUnits(x *feedpq.FooterIndex) []unit {
	groups := x.RowGroups()
	units := make([]unit, len(groups))
	for i, g := range groups {
		units[i] = unit{index: i, rows: g.Rows, off: g.Off, length: g.Length}
	}
	return units
}

// unitsOf returns the row groups of a parsed footer.
func unitsOf(md *metadata.FileMetaData, uri string) ([]unit, error) {
	units := make([]unit, 0, md.NumRowGroups())
	for i := 0; i < md.NumRowGroups(); i++ {
		rg := md.RowGroup(i)
		u := unit{index: i, rows: rg.NumRows()}
		span := feedpq.NewChunkSpan()
		for c := 0; c < rg.NumColumns(); c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: row group %d column %d: %w", ErrInput, uri, i, c, err)
			}
			span.Add(feedpq.ChunkStart(cc), cc.TotalCompressedSize())
		}
		u.off, u.length = span.Bytes()
		units = append(units, u)
	}
	return units, nil
}

// cleanSchema drops schema and field metadata (Parquet field ids and the
// like), which would otherwise make equal schemas look different.
func cleanSchema(s *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, s.NumFields())
	for i, f := range s.Fields() {
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable}
	}
	return arrow.NewSchema(fields, nil)
}

// parquetSource reads the row groups of one Parquet split. With several
// decode workers its columns are split into groups, each with a reader
// of its own (groupDecoder): every reader has the same row groups and
// batch size, so their batches cover the same rows, and they are joined
// side by side.
type parquetSource struct {
	uri    string
	file   fsys.File
	cache  *chunkCache // nil for local files
	schema *arrow.Schema
	groupDecoder
	skip int64 // rows still to drop from the start
}

// maxDecodeGroups bounds the column groups of a split: one per column up
// to it, so that decoders sharing a batch finish within a column of each
// other, and fewer, heavier ones past it, so that wide tables do not pay
// a record reader per column.
const maxDecodeGroups = 32

// decodeGroups is the number of column groups for workers decoders and
// fields selected columns.
func decodeGroups(workers, fields int) int {
	if workers <= 1 {
		return 1
	}
	return min(fields, maxDecodeGroups)
}

// openParquet opens a Parquet split: only its row groups, only the
// selected columns, starting RowOffset rows into the first row group.
// A remote file's column chunks are each fetched with one read; a local
// one's pages are read where they are needed.
func openParquet(ctx context.Context, f fsys.File, s Split, opts ReadOptions, remote bool) (*opened, error) {
	var src parquet.ReaderAtSeeker = f
	var cache *chunkCache
	if remote {
		cache = newChunkCache(f, opts.Allocator)
		src = cache
	}
	pf, fr, keep, err := openSplitFooter(src, f.Size(), s.URI, opts)
	if err != nil {
		return nil, err
	}
	fileSchema, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: convert the Parquet schema to Arrow: %w", ErrInput, s.URI, err)
	}
	sel, err := SelectColumns(FieldNames(fileSchema), opts.Columns, opts.LabelColumn, s.URI)
	if err != nil {
		return nil, err
	}
	out := ProjectSchema(fileSchema, sel)
	if opts.Schema != nil {
		if err := checkPlanned(opts.Schema, out, s.URI); err != nil {
			return nil, err
		}
		out = opts.Schema
	}
	rowGroups, err := splitRowGroups(s, fr.ParquetReader().NumRowGroups(), keep)
	if err != nil {
		return nil, err
	}
	fieldLeaves := make([][]int, len(sel))
	var leaves []int
	for i, name := range sel {
		fieldLeaves[i] = appendLeaves(nil, &fr.Manifest.Fields[fileSchema.FieldIndices(name)[0]])
		leaves = append(leaves, fieldLeaves[i]...)
	}
	var flat []bool
	if opts.pqarrowOnly {
		flat = make([]bool, len(fieldLeaves))
	} else {
		flat = feedpq.FlatFields(pf, rowGroups, fieldLeaves, fileSchema, sel)
	}
	// feedpq.FlatColumns reads a remote file's chunks itself, each whole with
	// one request, as the chunk cache does for pqarrow.
	window := feedpq.ChunkWindow
	if cache != nil {
		if err := cacheChunks(cache, pf, rowGroups, fieldLeaves, flat); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInput, s.URI, err)
		}
		window = feedpq.WholeChunks
	}
	// Columns feedpq.FlatColumns reads are narrowed as they are decoded
	// (Float32Features); the source's batches have them as float32, and
	// the split's reader converts the others.
	raw := decodedSchema(out, opts.outSchema(out), flat)
	p := &parquetSource{uri: s.URI, file: f, cache: cache, schema: raw}
	seek := s.RowOffset
	if seek > 0 && anyRepeated(pf, leaves) {
		// arrow-go's SeekToRow misreads repeated (list) columns: it
		// returns wrong lists, then fails. Read those rows and drop them.
		seek, p.skip = 0, s.RowOffset
	}
	for _, fields := range groupColumns(pf, rowGroups, fieldLeaves, decodeGroups(opts.DecodeWorkers, len(fieldLeaves))) {
		var gl, fl []int // the group's leaves read by pqarrow and by feedpq.FlatColumns
		var ffields []arrow.Field
		for _, i := range fields {
			if flat[i] {
				fl = append(fl, fieldLeaves[i][0])
				field := fileSchema.Field(fileSchema.FieldIndices(sel[i])[0])
				if raw != out {
					field.Type = raw.Field(i).Type
				}
				ffields = append(ffields, field)
				continue
			}
			gl = append(gl, fieldLeaves[i]...)
		}
		var readers []batchReader
		if len(fl) > 0 {
			readers = append(readers, newFlatReader(pf, f, window, rowGroups, fl, ffields, opts.Allocator, opts.batchAlloc, opts.BatchRows))
		}
		if len(gl) > 0 {
			sort.Ints(gl)
			rr, err := fr.GetRecordReader(ctx, gl, s.RowGroups)
			if err != nil {
				p.release()
				return nil, fmt.Errorf("read %s: %w", s.URI, err)
			}
			readers = append(readers, rr)
		}
		for _, rr := range readers {
			if err := p.addGroup(rr, sel, seek); err != nil {
				p.release()
				return nil, fmt.Errorf("read %s: skip %d rows: %w", s.URI, s.RowOffset, err)
			}
		}
	}
	p.start(opts.DecodeWorkers - 1)
	return &opened{src: p, schema: out}, nil
}

// openSplitFooter opens the file of a split through the footers the
// pipeline keeps: a footer read before, or the file's own, thinned to the
// rank's row groups (keep, nil for all) when the planned schema is known.
func openSplitFooter(src parquet.ReaderAtSeeker, size int64, uri string, opts ReadOptions) (*file.Reader, *pqarrow.FileReader, []int, error) {
	footer := footerKey{uri: uri, size: size}
	md := opts.footers.get(footer)
	var keep []int // the row groups a thinned footer keeps; nil: all
	if opts.Schema != nil {
		// Without the planned schema dictLeaves looks at every row group.
		keep = opts.footers.rowGroupsOf(uri)
	}
	if md == nil {
		md = feedpq.ThinMetaData(src, size, keep)
	}
	pf, fr, err := openParquetFile(src, uri, opts.Allocator, opts.BatchRows, md, opts.Schema)
	if err != nil {
		return nil, nil, nil, err
	}
	opts.footers.put(footer, pf.MetaData())
	return pf, fr, keep, nil
}

// cacheChunks has the chunk cache fetch, each with one read, the column
// chunks of rowGroups that pqarrow reads: the leaves of the fields
// feedpq.FlatColumns does not read (flat).
func cacheChunks(cache *chunkCache, pf *file.Reader, rowGroups []int, fieldLeaves [][]int, flat []bool) error {
	var cached []int
	for i, ls := range fieldLeaves {
		if !flat[i] {
			cached = append(cached, ls...)
		}
	}
	return cache.addChunks(pf, rowGroups, cached)
}

// splitRowGroups returns the row groups split s reads of a file of n
// (every one when it names none), checking that each is in the file and
// among keep, the row groups a thinned footer kept (nil: all).
func splitRowGroups(s Split, n int, keep []int) ([]int, error) {
	for _, rg := range s.RowGroups {
		if rg < 0 || rg >= n {
			return nil, fmt.Errorf("%w: %s has %d row groups, the split names row group %d", ErrInput, s.URI, n, rg)
		}
		if _, ok := slices.BinarySearch(keep, rg); keep != nil && !ok {
			// Not a split of the pipeline's: its footer may be thinned without it.
			return nil, fmt.Errorf("%s: row group %d is not among the rank's row groups %v", s.URI, rg, keep)
		}
	}
	rowGroups := s.RowGroups
	if len(rowGroups) == 0 {
		for rg := 0; rg < n; rg++ {
			rowGroups = append(rowGroups, rg)
		}
	}
	return rowGroups, nil
}

// decodedSchema is the schema of the source's batches: out, with the
// columns feedpq.FlatColumns decodes (flat) already narrowed as in narrowed.
func decodedSchema(out, narrowed *arrow.Schema, flat []bool) *arrow.Schema {
	if narrowed == out {
		return out
	}
	fields := out.Fields()
	for i := range fields {
		if flat[i] {
			fields[i].Type = narrowed.Field(i).Type
		}
	}
	return arrow.NewSchema(fields, nil)
}

// addGroup adds the column group rr reads, its columns placed by their
// names in sel, first skipping seek rows.
func (p *parquetSource) addGroup(rr batchReader, sel []string, seek int64) error {
	g := &columnGroup{rr: rr, at: make([]int, rr.Schema().NumFields())}
	for k, fld := range rr.Schema().Fields() {
		g.at[k] = slices.Index(sel, fld.Name)
	}
	p.groups = append(p.groups, g)
	if seek > 0 {
		return rr.SeekToRow(seek)
	}
	return nil
}

// anyRepeated reports whether any of the leaf columns is repeated (in a
// list or map).
func anyRepeated(pf *file.Reader, leaves []int) bool {
	for _, leaf := range leaves {
		if pf.MetaData().Schema.Column(leaf).MaxRepetitionLevel() > 0 {
			return true
		}
	}
	return false
}

// groupColumns deals the selected columns (by index, with their leaves)
// to at most n groups of about equal decoded bytes in the split's row
// groups, heaviest first, each to the lightest group so far; the heaviest
// groups come first.
func groupColumns(pf *file.Reader, rowGroups []int, fieldLeaves [][]int, n int) [][]int {
	workers := max(1, min(n, len(fieldLeaves)))
	if workers == 1 {
		all := make([]int, len(fieldLeaves))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	weight := make([]int64, len(fieldLeaves))
	for i, ls := range fieldLeaves {
		for _, rg := range rowGroups {
			rgmd := pf.MetaData().RowGroup(rg)
			for _, leaf := range ls {
				if cc, err := rgmd.ColumnChunk(leaf); err == nil {
					weight[i] += max(cc.TotalUncompressedSize(), 1)
				}
			}
		}
	}
	order := make([]int, len(fieldLeaves))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return weight[order[a]] > weight[order[b]] })
	type group struct {
		fields []int
		load   int64
	}
	groups := make([]group, workers)
	for _, i := range order {
		g := 0
		for j := range groups {
			if groups[j].load < groups[g].load {
				g = j
			}
		}
		groups[g].fields = append(groups[g].fields, i)
		groups[g].load += weight[i]
	}
	slices.SortStableFunc(groups, func(a, b group) int { return cmp.Compare(b.load, a.load) })
	out := make([][]int, len(groups))
	for k, g := range groups {
		out[k] = g.fields
	}
	return out
}

// appendLeaves appends the Parquet leaf column indices under field.
func appendLeaves(dst []int, field *pqarrow.SchemaField) []int {
	if field.IsLeaf() {
		return append(dst, field.ColIndex)
	}
	for i := range field.Children {
		dst = appendLeaves(dst, &field.Children[i])
	}
	return dst
}

func (p *parquetSource) next(ctx context.Context) (arrow.RecordBatch, error) {
	for {
		rec, err := p.read(ctx, p.uri, p.schema)
		if err != nil || p.skip == 0 {
			return rec, err
		}
		n := rec.NumRows()
		if n <= p.skip {
			p.skip -= n
			rec.Release()
			continue
		}
		out := rec.NewSlice(p.skip, n)
		rec.Release()
		p.skip = 0
		return out, nil
	}
}

func (p *parquetSource) release() {
	p.groupDecoder.release()
	if p.cache != nil {
		p.cache.release()
	}
}

func (p *parquetSource) close() error {
	p.release()
	return p.file.Close()
}
