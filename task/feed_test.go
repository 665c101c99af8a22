package task

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// source serves nBatches batches of rows rows per epoch with columns x
// (the epoch number) and y (the row number).
type source struct {
	nBatches, rows int
}

var sourceSchema = arrow.NewSchema([]arrow.Field{
	{Name: "x", Type: arrow.PrimitiveTypes.Int32},
	{Name: "y", Type: arrow.PrimitiveTypes.Float32},
}, nil)

func (s source) Schema() *arrow.Schema { return sourceSchema }

func (s source) Epoch(_ context.Context, epoch int) (feed.Reader, error) {
	return &sourceReader{s: s, epoch: epoch}, nil
}

type sourceReader struct {
	s        source
	epoch, i int
}

func (r *sourceReader) Schema() *arrow.Schema { return sourceSchema }

func (r *sourceReader) Next(context.Context) (arrow.RecordBatch, error) {
	if r.i == r.s.nBatches {
		return nil, io.EOF
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sourceSchema)
	defer b.Release()
	for row := range r.s.rows {
		b.Field(0).(*array.Int32Builder).Append(int32(r.epoch))
		b.Field(1).(*array.Float32Builder).Append(float32(r.i*r.s.rows + row))
	}
	r.i++
	return b.NewRecordBatch(), nil
}

func (r *sourceReader) Close() error { return nil }

// serve runs a feed server for env's mode until the test ends, and
// returns env pointing at it.
func serve(t *testing.T, mode wire.Mode, epochs int, src source) Env {
	t.Helper()
	return serveFrom(t, mode, epochs, src, 0, 0)
}

// serveFrom is serve starting at epoch startEpoch, batch startBatch.
func serveFrom(t *testing.T, mode wire.Mode, epochs int, src source, startEpoch int, startBatch int64) Env {
	t.Helper()
	dir, err := os.MkdirTemp("", "task")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "feed.sock")
	srv, err := wire.NewServer(wire.ServerConfig{SocketPath: sock, Mode: mode, Epochs: epochs, Source: src, LabelColumn: "y",
		StartEpoch: startEpoch, StartBatch: startBatch})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return srv.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Errorf("feed server: %v", err)
		}
	})
	return Env{WorldSize: 1, LocalWorldSize: 1, Feed: sock, FeedMode: mode, PeerListenFD: -1,
		FeedStartEpoch: startEpoch, FeedStartBatch: startBatch}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	t.Cleanup(cancel)
	return ctx
}

func TestArrowEpochs(t *testing.T) {
	ctx := testCtx(t)
	env := serve(t, wire.ModeArrow, 3, source{nBatches: 2, rows: 5})
	var epochs []int
	err := env.ArrowEpochs(ctx, func(ep *wire.ArrowEpoch) error {
		rows := 0
		for {
			rec, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if got := rec.Column(0).(*array.Int32).Value(0); int(got) != ep.Epoch() {
				t.Errorf("epoch %d carries data of epoch %d", ep.Epoch(), got)
			}
			rows += int(rec.NumRows())
			rec.Release()
		}
		if rows != 10 {
			t.Errorf("epoch %d: %d rows, want 10", ep.Epoch(), rows)
		}
		epochs = append(epochs, ep.Epoch())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(epochs) != 3 || epochs[0] != 0 || epochs[2] != 2 {
		t.Fatalf("saw epochs %v, want [0 1 2]", epochs)
	}
}

func TestTensorEpochs(t *testing.T) {
	ctx := testCtx(t)
	env := serve(t, wire.ModeTensor, 2, source{nBatches: 3, rows: 4})
	var seen []string
	err := env.TensorEpochs(ctx, func(ep *wire.TensorEpoch) error {
		var labels []float32
		for {
			b, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			for r := range b.Rows {
				if b.Features[r] != float32(ep.Epoch()) {
					t.Errorf("epoch %d row %d: feature %v", ep.Epoch(), r, b.Features[r])
				}
			}
			labels = append(labels, b.Labels...)
		}
		if len(labels) != 12 || labels[11] != 11 {
			t.Errorf("epoch %d labels %v", ep.Epoch(), labels)
		}
		seen = append(seen, strings.Join(ep.FeatureNames(), ","))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != "x" {
		t.Fatalf("epochs saw features %v", seen)
	}
}

// TestEpochsStopEarly leaves each epoch after one batch and stops the loop
// with the callback's error.
func TestEpochsStopEarly(t *testing.T) {
	ctx := testCtx(t)
	env := serve(t, wire.ModeTensor, 5, source{nBatches: 50, rows: 100})
	stop := errors.New("enough")
	n := 0
	err := env.TensorEpochs(ctx, func(ep *wire.TensorEpoch) error {
		if _, err := ep.Next(ctx); err != nil {
			return err
		}
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("TensorEpochs = %v after %d epochs, want the callback's error after 3", err, n)
	}
	ep, err := env.Tensors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	if ep.Epoch() != 3 {
		t.Fatalf("next connection got epoch %d, want 3", ep.Epoch())
	}
}

func TestDirect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "feed.json")
	spec := wire.DirectSpec{Rank: 0, WorldSize: 1, Epochs: 2, BatchRows: 64,
		Splits: []feed.Split{{URI: "file:///d/a.parquet", Format: feed.FormatParquet, RowGroups: []int{0}, Rows: 10}}}
	if err := wire.WriteDirectSpec(path, spec); err != nil {
		t.Fatal(err)
	}
	env := Env{WorldSize: 1, LocalWorldSize: 1, Feed: path, FeedMode: wire.ModeDirect}
	got, err := env.Direct()
	if err != nil {
		t.Fatal(err)
	}
	if got.Epochs != 2 || len(got.Splits) != 1 || got.Splits[0].URI != "file:///d/a.parquet" {
		t.Fatalf("Direct = %+v", got)
	}
}

func TestWrongMode(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		env  Env
		call func(Env) error
		want string
	}{
		{"no input", Env{}, func(e Env) error { _, err := e.Tensors(ctx); return err }, "no input"},
		{"tensors on arrow", Env{Feed: "/x", FeedMode: wire.ModeArrow},
			func(e Env) error { _, err := e.Tensors(ctx); return err }, "use Env.Batches or Env.ArrowEpochs"},
		{"batches on tensor", Env{Feed: "/x", FeedMode: wire.ModeTensor},
			func(e Env) error { _, err := e.Batches(ctx); return err }, "use Env.Tensors or Env.TensorEpochs"},
		{"batches on direct", Env{Feed: "/x", FeedMode: wire.ModeDirect},
			func(e Env) error { return e.ArrowEpochs(ctx, nil) }, "read the splits named by Env.Direct"},
		{"direct on arrow", Env{Feed: "/x", FeedMode: wire.ModeArrow},
			func(e Env) error { _, err := e.Direct(); return err }, "--feed direct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(tc.env)
			if !errors.Is(err, ErrNoFeed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrNoFeed containing %q", err, tc.want)
			}
		})
	}
}
