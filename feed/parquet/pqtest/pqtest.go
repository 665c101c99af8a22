// Package pqtest writes the Parquet files that the decoder's tests and
// the feed's read, so that both check the same files.
package pqtest

import (
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// FlatSchema is the schema of the files WriteFlat writes: one column of
// each fixed-width kind the decoder reads.
var FlatSchema = arrow.NewSchema([]arrow.Field{
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
	{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
}, nil)

// writeFlatParquet writes rows rows of flatSchema, in row groups of
// rgRows and pages of about 2 kB, compressed with codec, with data pages
// of version 2 or 1. Without dict the values are stored plainly; with it
// they are dictionary-encoded, f32 and u64 (a few distinct values)
// throughout, f64 and i32 (all distinct) until their dictionary reaches
// 2 kB, then plainly (as pyarrow and Spark write such columns). With
// nulls, the optional columns have nulls in runs of every length: every
// third row in the first half, none for a stretch, then a long run of
// nulls (RLE and bit-packed levels both).

// WriteFlat writes a Parquet file of FlatSchema at path: rows rows in
// row groups of rgRows, data pages of about pageSize bytes compressed
// with codec, version 2 data pages when v2, nulls in the nullable columns
// when nulls, dictionary-encoded when dict.
func WriteFlat(t testing.TB, path string, rows, rgRows, pageSize int, codec compress.Compression, v2, nulls, dict bool) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	version := parquet.DataPageV1
	if v2 {
		version = parquet.DataPageV2
	}
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(rgRows)), parquet.WithDataPageSize(int64(pageSize)),
		parquet.WithCompression(codec), parquet.WithDictionaryDefault(dict), parquet.WithDictionaryPageSizeLimit(2048),
		parquet.WithDataPageVersion(version))
	w, err := pqarrow.NewFileWriter(FlatSchema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, FlatSchema)
	defer b.Release()
	isNull := func(i int) bool {
		return nulls && ((i < rows/2 && i%3 == 0) || (i > rows*3/4 && i < rows*3/4+700))
	}
	for i := 0; i < rows; i++ {
		if isNull(i) {
			b.Field(0).AppendNull()
			b.Field(1).AppendNull()
			b.Field(3).AppendNull()
		} else {
			b.Field(0).(*array.Float32Builder).Append(float32(i%97) / 4)
			b.Field(1).(*array.Float64Builder).Append(float64(i) * 1.5)
			b.Field(3).(*array.Uint64Builder).Append(uint64(i%5) << 33)
		}
		b.Field(2).(*array.Int32Builder).Append(int32(-i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
