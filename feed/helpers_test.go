package feed

import (
	"context"
	"errors"
	"fmt"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"
	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/fsys"

	"github.com/spindle-ml/spindle/testbed/hdfstest"

	"github.com/spindle-ml/spindle/feed/internal/feedtest"
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

// The test data's writers and checks (feed/internal/feedtest), shared
// with feed/plan's tests.
var (
	testSchema     = feedtest.Schema
	testRecord     = feedtest.Record
	testRecordWith = feedtest.RecordWith
	writeParquet   = feedtest.WriteParquet
	writeBatches   = feedtest.WriteBatches
	writeArrow     = feedtest.WriteArrow
	csvText        = feedtest.CSVText
	csvTextOpts    = feedtest.CSVTextOpts
	writeText      = feedtest.WriteText
	checkAllOnce   = feedtest.CheckAllOnce
	fileURI        = feedtest.FileURI
)

// readAll reads r to the end and returns the batches' rows of column col
// (feedtest.ReadAll).
func readAll(t testing.TB, r Reader, col string) []int64 {
	t.Helper()
	return feedtest.ReadAll(t, r, col)
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

// Plan is the driver's planning (feed/plan's Plan), with which the feed's
// tests cut their inputs into splits. feed/plan imports feed, so a test
// of package feed cannot import it: plan_link_test.go, in the external
// test package, sets Plan before any test runs.
var Plan func(ctx context.Context, res *fsys.Resolver, req PlanRequest) (*JobPlan, error)

// withCSVChunk has planning and reading remember CSV record starts every
// n bytes for the test's length, so that small files have several units.
func withCSVChunk(t *testing.T, n int64) {
	old := csvChunkBytes
	csvChunkBytes = n
	t.Cleanup(func() { csvChunkBytes = old })
}

// newTestHDFS starts the protocol-level HDFS for tb, reached as its
// superuser without a Hadoop configuration, and returns it, a resolver
// closed with tb, and the file system at its root.
func newTestHDFS(tb testing.TB) (*hdfstest.Cluster, *fsys.Resolver, fsys.FS) {
	tb.Helper()
	c := hdfstest.NewTestCluster(tb, hdfstest.Config{})
	tb.Setenv("HADOOP_CONF_DIR", "")
	tb.Setenv("HADOOP_USER_NAME", c.Superuser())
	res := fsys.NewResolver(fsys.Options{})
	tb.Cleanup(func() { res.Close() })
	hfs, _, err := res.Resolve(context.Background(), "hdfs://"+c.Addr()+"/")
	if err != nil {
		tb.Fatal(err)
	}
	return c, res, hfs
}

// upload writes data to name on an HDFS file system.
func upload(t testing.TB, hfs fsys.FS, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	if err := hfs.MkdirAll(ctx, filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
	w, err := hfs.CreateAtomic(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}
