package wire

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// memSource is an in-memory EpochSource. Epoch k yields batches(k), or,
// when batches is nil, n batches made on demand by batch(k, i).
// failAfter >= 0 makes every epoch's reader fail after that many batches.
type memSource struct {
	schema    *arrow.Schema
	batches   func(epoch int) []arrow.RecordBatch
	batch     func(epoch, i int) arrow.RecordBatch
	n         int
	failAfter int
	// dry makes its readers report no batch ready, as a source whose next
	// batch may keep the caller waiting does.
	dry bool
}

var errSourceBroke = errors.New("source broke")

func (s *memSource) Schema() *arrow.Schema { return s.schema }

func (s *memSource) Epoch(_ context.Context, epoch int) (feed.Reader, error) {
	r := &memReader{schema: s.schema, failAfter: s.failAfter, dry: s.dry}
	if s.batches != nil {
		recs := s.batches(epoch)
		r.n = len(recs)
		r.make = func(i int) arrow.RecordBatch {
			rec := recs[i]
			recs[i] = nil
			return rec
		}
		r.close = func() {
			for _, rec := range recs {
				if rec != nil {
					rec.Release()
				}
			}
		}
	} else {
		r.n = s.n
		r.make = func(i int) arrow.RecordBatch { return s.batch(epoch, i) }
	}
	return r, nil
}

type memReader struct {
	schema    *arrow.Schema
	n, i      int
	make      func(i int) arrow.RecordBatch
	close     func()
	failAfter int
	dry       bool
}

func (r *memReader) Schema() *arrow.Schema { return r.schema }

func (r *memReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.failAfter >= 0 && r.i == r.failAfter {
		return nil, errSourceBroke
	}
	if r.i == r.n {
		return nil, io.EOF
	}
	r.i++
	return r.make(r.i - 1), nil // ownership passes to the caller
}

// Buffered says every remaining batch is ready, as a prefetching source
// that is ahead of its consumer does, unless the source is dry.
func (r *memReader) Buffered() int {
	if r.dry {
		return 0
	}
	return r.n - r.i
}

func (r *memReader) Close() error {
	if r.close != nil {
		r.close()
		r.close = nil
	}
	return nil
}

// numSchema is the schema of numBatch: two features and a label.
var numSchema = arrow.NewSchema([]arrow.Field{
	{Name: "x", Type: arrow.PrimitiveTypes.Float32},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "y", Type: arrow.PrimitiveTypes.Float64},
}, nil)

// numBatch returns rows rows whose values encode epoch, batch and row, so
// a reader can tell exactly which ones it got.
func numBatch(mem memory.Allocator, epoch, batch, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, numSchema)
	defer b.Release()
	for r := range rows {
		v := float64(epoch*1_000_000 + batch*1000 + r)
		b.Field(0).(*array.Float32Builder).Append(float32(v))
		if r%3 == 2 {
			b.Field(1).(*array.Int64Builder).AppendNull()
		} else {
			b.Field(1).(*array.Int64Builder).Append(int64(-r))
		}
		b.Field(2).(*array.Float64Builder).Append(v / 2)
	}
	return b.NewRecordBatch()
}

// numSource has nBatches batches of rows rows per epoch, made on demand from a
// checked allocator that the test verifies is empty at its end: the server
// must release every batch it takes.
func numSource(t *testing.T, nBatches, rows int) *memSource {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return &memSource{schema: numSchema, failAfter: -1, n: nBatches, batch: func(epoch, i int) arrow.RecordBatch {
		return numBatch(mem, epoch, i, rows)
	}}
}

// testCtx returns a context bounded well below the test binary's timeout.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// startServer creates and runs a server in a fresh directory. Stopping it
// (stop, or the test's end) cancels Run and returns Run's error.
// Each tweak changes the server before it runs.
func startServer(t *testing.T, cfg ServerConfig, tweaks ...func(*Server)) (srv *Server, stop func() error) {
	t.Helper()
	if cfg.SocketPath == "" {
		cfg.SocketPath = filepath.Join(shortTempDir(t), "feed.sock")
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	for _, tweak := range tweaks {
		tweak(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return srv.Run(ctx) })
	stopped := false
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = g.Wait()
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return srv, stop
}

// shortTempDir returns a temporary directory whose path is short enough
// for a Unix socket (t.TempDir embeds the test name and may be too long).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
