package feed

import (
	"context"
	"errors"
	"fmt"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/fsys"
)

func TestMain(m *testing.M) {
	startGzip, _ = compress.GetCodec(compress.Codecs.Gzip)
	startZstd, _ = compress.GetCodec(compress.Codecs.Zstd)
	RegisterPageCodecs() // as the spindle binary does
	if req, ok := os.LookupEnv(scanProcessEnv); ok {
		if err := runScanProcess(req); err != nil {
			fmt.Fprintln(os.Stderr, "scan process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// startGzip and startZstd are the codecs arrow-go held before the tests
// registered Spindle's (TestImportLeavesCodecsAlone).
var startGzip, startZstd compress.Codec

// testSchema is the schema of the test files: a unique row id, a feature,
// a string and a label.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// testRecord builds rows [start, start+n) of the test data.
func testRecord(sc *arrow.Schema, start, n int64) arrow.RecordBatch {
	return testRecordWith(memory.DefaultAllocator, sc, start, n)
}

// testRecordWith is testRecord allocating from mem.
func testRecordWith(mem memory.Allocator, sc *arrow.Schema, start, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for i := start; i < start+n; i++ {
		for c, f := range sc.Fields() {
			switch f.Name {
			case "id":
				b.Field(c).(*array.Int64Builder).Append(i)
			case "x":
				switch fb := b.Field(c).(type) {
				case *array.Float64Builder:
					fb.Append(float64(i) / 2)
				case *array.Float32Builder:
					fb.Append(float32(i) / 2)
				}
			case "name":
				b.Field(c).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
			case "label":
				b.Field(c).(*array.Int64Builder).Append(i % 2)
			}
		}
	}
	return b.NewRecordBatch()
}

// writeParquet writes rows [start, start+rows) in row groups of rgRows.
func writeParquet(t testing.TB, path string, sc *arrow.Schema, start, rows, rgRows int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rgRows))
	w, err := pqarrow.NewFileWriter(sc, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	writeBatches(t, w, sc, start, rows, rgRows)
	return path
}

// batchWriter is what the Parquet and Arrow IPC file writers share.
type batchWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// writeBatches writes rows [start, start+rows) to w in batches of
// batchRows, then closes it.
func writeBatches(t testing.TB, w batchWriter, sc *arrow.Schema, start, rows, batchRows int64) {
	t.Helper()
	for off := int64(0); off < rows; off += batchRows {
		rec := testRecord(sc, start+off, min(batchRows, rows-off))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeArrow writes rows [start, start+rows) as an Arrow IPC file in
// record batches of batchRows.
func writeArrow(t testing.TB, path string, start, rows, batchRows int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	writeBatches(t, w, testSchema, start, rows, batchRows)
	return path
}

// csvText returns rows [start, start+rows) as CSV, with names that need
// quoting now and then (a comma, a doubled quote, a line break).
func csvText(start, rows int64, header bool) string { return csvTextOpts(start, rows, header, true) }

// csvTextOpts is csvText, with quoted line breaks only when multiline.
func csvTextOpts(start, rows int64, header, multiline bool) string {
	var sb strings.Builder
	if header {
		sb.WriteString("id,x,name,label\n")
	}
	for i := start; i < start+rows; i++ {
		name := fmt.Sprintf("row %d", i)
		switch i % 7 {
		case 3:
			name = fmt.Sprintf(`"row, %d"`, i)
		case 5:
			name = fmt.Sprintf(`"row ""%d"""`, i)
		case 6:
			if multiline {
				name = fmt.Sprintf("\"row\n%d\"", i)
			}
		}
		end := "\n"
		if i%4 == 1 {
			end = "\r\n"
		}
		fmt.Fprintf(&sb, "%d,%g,%s,%d%s", i, float64(i)/2, name, i%2, end)
	}
	return sb.String()
}

func writeText(t testing.TB, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// eachBatch calls check with each batch next returns, and the row at
// which the batch starts, until io.EOF; it returns the rows read. check
// must not keep the batch.
func eachBatch(t testing.TB, next func(context.Context) (arrow.RecordBatch, error), check func(rec arrow.RecordBatch, off int64)) int64 {
	t.Helper()
	var off int64
	for {
		rec, err := next(context.Background())
		if errors.Is(err, io.EOF) {
			return off
		}
		if err != nil {
			t.Fatal(err)
		}
		check(rec, off)
		off += rec.NumRows()
		rec.Release()
	}
}

// readAll reads r to the end and returns the batches' rows of column col
// (an int64 column), checking every batch's schema.
func readAll(t testing.TB, r Reader, col string) []int64 {
	t.Helper()
	defer r.Close()
	var ids []int64
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Schema().Equal(r.Schema()) {
			t.Fatalf("batch schema %v, reader schema %v", rec.Schema(), r.Schema())
		}
		idx := rec.Schema().FieldIndices(col)
		if len(idx) == 0 {
			t.Fatalf("no column %q in %v", col, rec.Schema())
		}
		a := rec.Column(idx[0]).(*array.Int64)
		for i := 0; i < a.Len(); i++ {
			ids = append(ids, a.Value(i))
		}
		rec.Release()
	}
}

// epochRows reads epoch of p to the end and returns its rows.
func epochRows(tb testing.TB, p *Pipeline, epoch int) int64 {
	tb.Helper()
	rows, err := readEpoch(context.Background(), p, epoch)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

// readEpoch is epochRows saying what went wrong instead of failing a
// test (the scan process has none to fail).
func readEpoch(ctx context.Context, p *Pipeline, epoch int) (int64, error) {
	r, err := p.Epoch(ctx, epoch)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var rows int64
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, fmt.Errorf("epoch %d, after %d rows: %w", epoch, rows, err)
		}
		rows += rec.NumRows()
		rec.Release()
	}
}

// checkAllOnce checks that got holds 0..n-1 exactly once each.
func checkAllOnce(t testing.TB, got []int64, n int64) {
	t.Helper()
	seen := make([]int, n)
	for _, id := range got {
		if id < 0 || id >= n {
			t.Fatalf("row id %d outside 0..%d", id, n-1)
		}
		seen[id]++
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("row %d read %d times (read %d rows, want %d)", id, c, len(got), n)
		}
	}
}

func newResolver() *fsys.Resolver { return fsys.NewResolver(fsys.Options{}) }

// plannedPipeline plans input for one rank with label column "label" and
// returns the pipeline of cfg over its splits, which the caller closes.
func plannedPipeline(tb testing.TB, res *fsys.Resolver, input string, cfg PipelineConfig) *Pipeline {
	tb.Helper()
	p, err := planPipeline(context.Background(), res, input, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// planPipeline is plannedPipeline saying what went wrong instead of
// failing a test.
func planPipeline(ctx context.Context, res *fsys.Resolver, input string, cfg PipelineConfig) (*Pipeline, error) {
	plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{input}, Ranks: 1, LabelColumn: "label"})
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", input, err)
	}
	cfg.Splits, cfg.Schema, cfg.LabelColumn = plan.Ranks[0], plan.Schema, "label"
	p, err := NewPipeline(res, cfg)
	if err != nil {
		return nil, fmt.Errorf("a pipeline for %s: %w", input, err)
	}
	return p, nil
}

// decodeBenchConfig is the pipeline the decode benchmarks time: batches of
// DefaultBatchRows, 8 read ahead within 256 MiB, no even batches, workers
// decoders.
func decodeBenchConfig(workers int) PipelineConfig {
	return PipelineConfig{BatchRows: DefaultBatchRows, Prefetch: 8, MemoryBudget: 256 << 20, EvenBatches: EvenOff, DecodeWorkers: workers}
}

func fileURI(path string) string { return "file://" + filepath.ToSlash(path) }

// openParquetTest opens the Parquet file at path for the test's length.
func openParquetTest(t testing.TB, path string) (*os.File, *file.Reader) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, pf
}

// readPipeline reads one epoch and returns the id column.
func readPipeline(ctx context.Context, res *fsys.Resolver, cfg PipelineConfig) ([]int64, error) {
	p, err := NewPipeline(res, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	rd, err := p.Epoch(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var ids []int64
	for {
		rec, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return ids, nil
		}
		if err != nil {
			return nil, err
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
}
