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
	dim := int(spec.Dim)
	fs, name, err := res.Resolve(ctx, uri)
	if err != nil {
		return 0, fmt.Errorf("export table %s to %s: %w", table, uri, err)
	}
	out, err := fs.CreateAtomic(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("export table %s to %s: %w", table, uri, err)
	}
	defer out.Abort() // after Commit, nothing
	schema := ExportSchema(dim)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(false))
	// The Arrow schema rides along, so the values read back as fixed-size lists.
	w, err := pqarrow.NewFileWriter(schema, out, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return 0, fmt.Errorf("export table %s to %s: %w", table, uri, err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	keyB := b.Field(0).(*array.Uint64Builder)
	listB := b.Field(1).(*array.FixedSizeListBuilder)
	valB := listB.ValueBuilder().(*array.Float32Builder)
	err = c.Export(ctx, table, func(keys []uint64, values []float32) error {
		keyB.AppendValues(keys, nil)
		for range keys {
			listB.Append(true)
		}
		valB.AppendValues(values, nil)
		rec := b.NewRecordBatch()
		defer rec.Release()
		rows += rec.NumRows()
		return w.Write(rec)
	})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("export table %s to %s: %w", table, uri, err)
	}
	if err := out.Commit(); err != nil {
		return 0, fmt.Errorf("export table %s to %s: %w", table, uri, err)
	}
	return rows, nil
}
