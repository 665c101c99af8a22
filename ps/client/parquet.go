package client

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/fsys"
)

// ExportSchema is the schema of an exported table: one row per key, its
// values as a fixed-size list of dim float32s.
func ExportSchema(dim int) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "value", Type: arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32)},
	}, nil)
}

// ExportParquet writes every row of table to one Parquet file at uri (a
// local path or hdfs://), for serving or inspection. The file appears
// whole or not at all: it is written under a temporary name and published
// at the end.
func (c *Client) ExportParquet(ctx context.Context, table, uri string, res *fsys.Resolver) (rows int64, err error) {
	spec, err := c.table(table)
	if err != nil {
		return 0, err
	}
	rows, err = WriteParquet(ctx, res, uri, int(spec.Dim), func(emit func(keys []uint64, values []float32) error) error {
		return c.Export(ctx, table, emit)
	})
	if err != nil {
		return 0, fmt.Errorf("export table %s: %w", table, err)
	}
	return rows, nil
}

// WriteParquet writes the rows that each hands to emit (keys, and dim
// values per key) to one Parquet file at uri with ExportSchema(dim),
// published whole or not at all. It returns the rows written.
func WriteParquet(ctx context.Context, res *fsys.Resolver, uri string, dim int,
	each func(emit func(keys []uint64, values []float32) error) error) (rows int64, err error) {
	w, err := NewParquetWriter(ctx, res, uri, dim)
	if err != nil {
		return 0, err
	}
	defer w.Abort()
	if err := each(w.Write); err != nil {
		return 0, fmt.Errorf("write %s: %w", uri, err)
	}
	return w.Commit()
}

// A ParquetWriter writes rows of a table to one Parquet file with
// ExportSchema(dim), published by Commit whole, or never (Abort).
type ParquetWriter struct {
	uri   string
	dim   int
	out   fsys.AtomicFile
	w     *pqarrow.FileWriter
	b     *array.RecordBuilder
	rows  int64
	ended bool
}

// NewParquetWriter starts the file at uri (a local path or hdfs://).
func NewParquetWriter(ctx context.Context, res *fsys.Resolver, uri string, dim int) (*ParquetWriter, error) {
	fs, name, err := res.Resolve(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", uri, err)
	}
	out, err := fsys.CreatePrivate(ctx, fs, name)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", uri, err)
	}
	schema := ExportSchema(dim)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(false))
	// The Arrow schema rides along, so the values read back as fixed-size lists.
	w, err := pqarrow.NewFileWriter(schema, out, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		out.Abort()
		return nil, fmt.Errorf("write %s: %w", uri, err)
	}
	return &ParquetWriter{uri: uri, dim: dim, out: out, w: w, b: array.NewRecordBuilder(memory.DefaultAllocator, schema)}, nil
}

// Write adds keys and their values, dim each.
func (p *ParquetWriter) Write(keys []uint64, values []float32) error {
	if len(values) != len(keys)*p.dim {
		return fmt.Errorf("write %s: %d keys with %d values: want %d values each", p.uri, len(keys), len(values), p.dim)
	}
	p.b.Field(0).(*array.Uint64Builder).AppendValues(keys, nil)
	listB := p.b.Field(1).(*array.FixedSizeListBuilder)
	for range keys {
		listB.Append(true)
	}
	listB.ValueBuilder().(*array.Float32Builder).AppendValues(values, nil)
	rec := p.b.NewRecordBatch()
	defer rec.Release()
	p.rows += rec.NumRows()
	if err := p.w.Write(rec); err != nil {
		return fmt.Errorf("write %s: %w", p.uri, err)
	}
	return nil
}

// Commit ends the file and publishes it; it returns the rows written.
func (p *ParquetWriter) Commit() (int64, error) {
	p.ended = true
	defer p.b.Release()
	if err := p.w.Close(); err != nil {
		p.out.Abort()
		return 0, fmt.Errorf("write %s: %w", p.uri, err)
	}
	if err := p.out.Commit(); err != nil {
		return 0, fmt.Errorf("write %s: %w", p.uri, err)
	}
	return p.rows, nil
}

// Abort drops the file, unless it was committed.
func (p *ParquetWriter) Abort() {
	if p.ended {
		return
	}
	p.ended = true
	p.b.Release()
	_ = p.w.Close()
	p.out.Abort()
}
