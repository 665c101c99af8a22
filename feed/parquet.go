package feed

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/feed/fsys"
)

// openParquetFile reads a Parquet file's footer. The reader must not be
// closed (that would close f); the caller closes f.
func openParquetFile(f fsys.File, uri string, alloc memory.Allocator, batchRows int) (*file.Reader, *pqarrow.FileReader, error) {
	props := parquet.NewReaderProperties(alloc)
	// Unbuffered: each column chunk is fetched whole with a single ReadAt
	// before its pages are decoded, rather than one small read per page,
	// which is what a remote file system (HDFS) wants.
	props.BufferedStreamEnabled = false
	pf, err := file.NewParquetReader(f, file.WithReadProps(props))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s is not a Parquet file or is damaged: %w", ErrInput, uri, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, alloc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: read the Parquet schema: %w", ErrInput, uri, err)
	}
	return pf, fr, nil
}

// inspectParquet returns a Parquet file's schema and its row groups.
func inspectParquet(f fsys.File, uri string) (*arrow.Schema, []unit, error) {
	pf, fr, err := openParquetFile(f, uri, memory.DefaultAllocator, 0)
	if err != nil {
		return nil, nil, err
	}
	schema, err := fr.Schema()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: convert the Parquet schema to Arrow: %w", ErrInput, uri, err)
	}
	md := pf.MetaData()
	units := make([]unit, 0, md.NumRowGroups())
	for i := 0; i < md.NumRowGroups(); i++ {
		rg := md.RowGroup(i)
		u := unit{index: i, rows: rg.NumRows(), off: -1}
		var end int64
		for c := 0; c < rg.NumColumns(); c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: row group %d column %d: %w", ErrInput, uri, i, c, err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			if u.off < 0 || start < u.off {
				u.off = start
			}
			end = max(end, start+cc.TotalCompressedSize())
		}
		if u.off < 0 {
			u.off = 0
		}
		u.length = max(end-u.off, 0)
		units = append(units, u)
	}
	return cleanSchema(schema), units, nil
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

// parquetSource reads the row groups of one Parquet split.
type parquetSource struct {
	uri  string
	file fsys.File
	rr   pqarrow.RecordReader
}

// openParquet opens a Parquet split: only its row groups, only the
// selected columns, starting RowOffset rows into the first row group.
func openParquet(ctx context.Context, f fsys.File, s Split, opts ReadOptions) (*opened, error) {
	_, fr, err := openParquetFile(f, s.URI, opts.Allocator, opts.BatchRows)
	if err != nil {
		return nil, err
	}
	fileSchema, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: convert the Parquet schema to Arrow: %w", ErrInput, s.URI, err)
	}
	sel, err := selectColumns(fieldNames(fileSchema), opts.Columns, opts.LabelColumn, s.URI)
	if err != nil {
		return nil, err
	}
	out := projectSchema(fileSchema, sel)
	if opts.Schema != nil {
		if err := checkPlanned(opts.Schema, out, s.URI); err != nil {
			return nil, err
		}
		out = opts.Schema
	}
	var leaves []int
	for _, name := range sel {
		leaves = appendLeaves(leaves, &fr.Manifest.Fields[fileSchema.FieldIndices(name)[0]])
	}
	sort.Ints(leaves)
	n := fr.ParquetReader().NumRowGroups()
	for _, rg := range s.RowGroups {
		if rg < 0 || rg >= n {
			return nil, fmt.Errorf("%w: %s has %d row groups, the split names row group %d", ErrInput, s.URI, n, rg)
		}
	}
	rr, err := fr.GetRecordReader(ctx, leaves, s.RowGroups)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.URI, err)
	}
	if s.RowOffset > 0 {
		if err := rr.SeekToRow(s.RowOffset); err != nil {
			rr.Release()
			return nil, fmt.Errorf("read %s: skip %d rows: %w", s.URI, s.RowOffset, err)
		}
	}
	proj := make([]int, len(sel))
	for i, name := range sel {
		proj[i] = rr.Schema().FieldIndices(name)[0]
	}
	return &opened{src: &parquetSource{uri: s.URI, file: f, rr: rr}, schema: out, proj: proj}, nil
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !p.rr.Next() {
		if err := p.rr.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", p.uri, err)
		}
		return nil, io.EOF
	}
	rec := p.rr.RecordBatch()
	rec.Retain()
	return rec, nil
}

func (p *parquetSource) close() error {
	p.rr.Release()
	return p.file.Close()
}
