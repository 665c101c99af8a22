package feed

import (
	"context"
	"flag"
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
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

var (
	benchRows      = flag.Int("decode.rows", 393216, "rows in the decode benchmark's Parquet file (32 float32 features and an int64 label: about 50 MB)")
	benchBatchRows = flag.Int("decode.batch-rows", 16384, "rows per batch in the decode benchmark")
)

// writeBenchParquet writes random float32 features f0..f31 and an int64
// label in row groups of 65536 rows, snappy-compressed.
func writeBenchParquet(b *testing.B, path string, rows int) int64 {
	const features = 32
	fields := make([]arrow.Field, 0, features+1)
	for j := 0; j < features; j++ {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("f%d", j), Type: arrow.PrimitiveTypes.Float32})
	}
	fields = append(fields, arrow.Field{Name: "label", Type: arrow.PrimitiveTypes.Int64})
	sc := arrow.NewSchema(fields, nil)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(65536), parquet.WithDictionaryDefault(false))
	w, err := pqarrow.NewFileWriter(sc, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for off := 0; off < rows; off += 65536 {
		n := min(65536, rows-off)
		bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for j := 0; j < features; j++ {
			fb := bld.Field(j).(*array.Float32Builder)
			for i := 0; i < n; i++ {
				fb.Append(float32(rng.NormFloat64()))
			}
		}
		lb := bld.Field(features).(*array.Int64Builder)
		for i := 0; i < n; i++ {
			lb.Append(int64(rng.IntN(2)))
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// BenchmarkDecode reads a ~50 MB Parquet file with pqarrow alone (the
// baseline) and through the feed pipeline (with the default decode
// goroutines, with one, and shuffling), reporting rows/s for each and the
// pipeline's share of the baseline's rate. Each iteration builds a new
// pipeline, so its buffer pool starts empty every time.
func BenchmarkDecode(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.parquet")
	size := writeBenchParquet(b, path, *benchRows)
	batch := *benchBatchRows
	b.Logf("file: %d rows, %.1f MB, batches of %d rows", *benchRows, float64(size)/1e6, batch)
	ctx := context.Background()
	rates := map[string]float64{}

	measure := func(name string, epoch func(b *testing.B) int64) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(*benchRows) * (32*4 + 8))
			var rows int64
			start := time.Now()
			for i := 0; i < b.N; i++ {
				rows += epoch(b)
			}
			rate := float64(rows) / time.Since(start).Seconds()
			b.ReportMetric(rate, "rows/s")
			rates[name] = rate
		})
	}

	measure("pqarrow", func(b *testing.B) int64 {
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			b.Fatal(err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batch)}, memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		rr, err := fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer rr.Release()
		var rows int64
		for rr.Next() {
			rows += rr.RecordBatch().NumRows()
		}
		if err := rr.Err(); err != nil {
			b.Fatal(err)
		}
		return rows
	})

	res := newResolver()
	plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{path}, Ranks: 1, LabelColumn: "label"})
	if err != nil {
		b.Fatal(err)
	}
	pipelineEpoch := func(shuffle bool, workers int) func(b *testing.B) int64 {
		return func(b *testing.B) int64 {
			p, err := NewPipeline(res, PipelineConfig{Splits: plan.Ranks[0], Schema: plan.Schema, LabelColumn: "label",
				BatchRows: batch, Prefetch: 8, MemoryBudget: 256 << 20, EvenBatches: EvenOff, Shuffle: shuffle, Seed: 1,
				DecodeWorkers: workers})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			return epochRows(b, p, 0)
		}
	}
	measure("pipeline", pipelineEpoch(false, 0))
	measure("pipeline-1worker", pipelineEpoch(false, 1))
	measure("pipeline-shuffle", pipelineEpoch(true, 0))

	if base := rates["pqarrow"]; base > 0 {
		b.Logf("pipeline/pqarrow = %.2f, pipeline-1worker/pqarrow = %.2f, pipeline-shuffle/pqarrow = %.2f (rows/s ratios, same run)",
			rates["pipeline"]/base, rates["pipeline-1worker"]/base, rates["pipeline-shuffle"]/base)
	}
}
