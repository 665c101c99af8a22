package feed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/fsys"
)

// BenchmarkFlatColumns decodes files of 1M rows of 16 optional float32
// columns (snappy, one row group) on one goroutine, through flatColumns
// and through pqarrow alone (pqarrowOnly), in the same run, and reports
// rows/s and their ratio per file: random values stored plainly; random
// values written with arrow-go's defaults (dictionary encoding, which
// pyarrow and Spark also default to); and 1,000 distinct values, also
// dictionary-encoded.
func BenchmarkFlatColumns(b *testing.B) {
	const rows, cols = 1 << 20, 16
	files := []struct {
		name     string
		dict     bool
		distinct int // 0: random
	}{{"plain", false, 0}, {"dictionary-random", true, 0}, {"dictionary-1000", true, 1000}}
	for _, file := range files {
		path := filepath.Join(b.TempDir(), file.name+".parquet")
		writeFloatsParquet(b, path, rows, cols, file.dict, file.distinct)
		rates := map[bool]float64{}
		for _, pqarrowOnly := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/pqarrowOnly=%v", file.name, pqarrowOnly), func(b *testing.B) {
				pool := newBufferPool(memory.DefaultAllocator, defaultPoolBytes)
				defer pool.close()
				start := time.Now()
				var read int64
				for b.Loop() {
					read += decodeAll(b, path, ReadOptions{BatchRows: DefaultBatchRows, Allocator: pool, pqarrowOnly: pqarrowOnly})
				}
				rates[pqarrowOnly] = float64(read) / time.Since(start).Seconds()
				b.ReportMetric(rates[pqarrowOnly], "rows/s")
			})
		}
		if rates[true] > 0 {
			// Printed: a parent benchmark's log shows only with -v.
			fmt.Printf("BenchmarkFlatColumns: %s: flatColumns/pqarrow = %.2f (rows/s, same run)\n", file.name, rates[false]/rates[true])
		}
	}
}

// decodeAll reads a whole Parquet file as one split and returns its rows.
func decodeAll(b *testing.B, path string, opts ReadOptions) int64 {
	f, err := fsys.Local().Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	op, err := openParquet(context.Background(), f, Split{URI: path, Format: FormatParquet}, opts, false)
	if err != nil {
		f.Close()
		b.Fatal(err)
	}
	ps := op.src.(*parquetSource)
	defer ps.close()
	return eachBatch(b, ps.next, func(arrow.RecordBatch, int64) {})
}

// writeFloatsParquet writes rows rows of cols optional float32 columns,
// uniform random or of distinct values, dictionary-encoded by default or
// not at all.
func writeFloatsParquet(b *testing.B, path string, rows, cols int, dict bool, distinct int) {
	fields := make([]arrow.Field, cols)
	for c := range fields {
		fields[c] = arrow.Field{Name: fmt.Sprintf("f%d", c), Type: arrow.PrimitiveTypes.Float32, Nullable: true}
	}
	schema := arrow.NewSchema(fields, nil)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(rows)), parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(dict))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	for off := 0; off < rows; off += rows / 16 {
		for c := 0; c < cols; c++ {
			fb := bld.Field(c).(*array.Float32Builder)
			for i := 0; i < rows/16; i++ {
				if distinct > 0 {
					fb.Append(float32(rng.IntN(distinct)))
				} else {
					fb.Append(rng.Float32())
				}
			}
		}
		rec := bld.NewRecordBatch()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
