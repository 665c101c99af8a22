package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/spindle-ml/spindle/feed"
)

// arrowColumns reads one epoch of an arrow feed, every float32 column's
// values in order. With hold, the batches are kept until the epoch ends;
// with scribble, each is overwritten with NaN after it is read, as a
// training process may do with what it was given.
func arrowColumns(ctx context.Context, t *testing.T, sock string, hold, scribble bool) [][]float32 {
	t.Helper()
	ep, err := DialArrow(ctx, sock)
	if err != nil {
		t.Fatalf("DialArrow: %v", err)
	}
	defer ep.Close()
	var cols [][]float32
	var held []arrow.RecordBatch
	defer func() {
		for _, rec := range held {
			rec.Release()
		}
	}()
	for {
		rec, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			return cols
		}
		if err != nil {
			t.Fatalf("epoch %d: Next: %v", ep.Epoch(), err)
		}
		if cols == nil {
			cols = make([][]float32, rec.NumCols())
		}
		for i, c := range rec.Columns() {
			vals := c.(*array.Float32).Float32Values()
			cols[i] = append(cols[i], vals...)
			if scribble {
				for j := range vals {
					vals[j] = float32(math.NaN())
				}
			}
		}
		if hold {
			held = append(held, rec)
		} else {
			rec.Release()
		}
	}
}

// writeFeedFile writes a Parquet file of rows rows of 4 float32
// features and a label, and returns it with the values a 4096-row feed of
// it delivers, read from a pipeline directly.
func writeFeedFile(ctx context.Context, t *testing.T, rows int) (string, [][]float32) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.parquet")
	if _, err := writeBenchParquet(path, rows, 4); err != nil {
		t.Fatal(err)
	}
	pipe, err := newBenchPipeline(ctx, path, ModeArrow, 4096, 4, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Close()
	return path, pipelineColumns(ctx, t, pipe)
}

// serveFromRegion serves epochs epochs of the feed file at path in
// 4096-row batches from a pipeline that decodes into region, with an epoch
// cache of cache bytes, as an executor does. Stop the server before
// closing the pipeline.
func serveFromRegion(ctx context.Context, t *testing.T, path string, region *SharedRegion, cache int64, epochs int) (*Server, *feed.Pipeline, func() error) {
	t.Helper()
	pipe, err := newBenchPipeline(ctx, path, ModeArrow, 4096, 4, cache, region)
	if err != nil {
		t.Fatal(err)
	}
	srv, stop := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: epochs, Source: pipe, LabelColumn: "label",
		SharedMemory: true, SharedRegion: region})
	return srv, pipe, stop
}

// pipelineColumns reads one epoch of pipe directly: the values a feed of
// it must deliver.
func pipelineColumns(ctx context.Context, t *testing.T, pipe *feed.Pipeline) [][]float32 {
	t.Helper()
	r, err := pipe.Epoch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var cols [][]float32
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return cols
		}
		if err != nil {
			t.Fatal(err)
		}
		if cols == nil {
			cols = make([][]float32, rec.NumCols())
		}
		for i, c := range rec.Columns() {
			cols[i] = append(cols[i], c.(*array.Float32).Float32Values()...)
		}
		rec.Release()
	}
}

func sameColumns(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d columns, want %d", what, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s: column %d has %d values, want %d", what, i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("%s: column %d row %d is %v, want %v", what, i, j, got[i][j], want[i][j])
			}
		}
	}
}

// TestSharedRegionPipeline feeds a Parquet file through a pipeline that
// decodes into the server's SharedRegion, as an executor does: the
// batches go out where they lie, every value arrives, and a training
// process that writes into the batches it was given changes nothing
// later epochs see, also with the epoch cache.
func TestSharedRegionPipeline(t *testing.T) {
	ctx := testCtx(t)
	path, want := writeFeedFile(ctx, t, 150_000)

	for _, tc := range []struct {
		name  string
		cache int64
	}{{"uncached", 0}, {"cached", 64 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			region := newTestRegion(t)
			srv, pipe, stop := serveFromRegion(ctx, t, path, region, tc.cache, 3)
			for e := range 3 {
				got := arrowColumns(ctx, t, srv.cfg.SocketPath, false, true)
				sameColumns(t, fmt.Sprintf("epoch %d", e), got, want)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			pipe.Close()
			batches := srv.Stats().Batches
			inPlace := srv.shmInPlace.Load()
			// Uncached, every epoch is decoded into the region; the
			// splits the cache records are decoded into the pipeline's
			// memory (the cache hands their batches out again) and
			// copied, in the first epoch and from the cache after.
			if tc.cache == 0 && inPlace < batches*9/10 || tc.cache > 0 && inPlace != 0 {
				t.Fatalf("%d of %d batches went out where they lay", inPlace, batches)
			}
			if n := region.r.lentBytes(); n != 0 {
				t.Fatalf("%d bytes of the region still lent after the pipeline closed", n)
			}
		})
	}
}

// TestSharedRegionHeldBatches holds every batch of an epoch, many times
// what the region lends: the pipeline decodes the rest into its own
// memory, those are copied (inline once the region's messages are full
// too), and the stream neither stalls nor loses a row.
func TestSharedRegionHeldBatches(t *testing.T) {
	ctx := testCtx(t)
	path, want := writeFeedFile(ctx, t, 250_000)

	r, err := newShmRegion(1<<20, 3<<20)
	if err != nil {
		t.Skipf("no shared memory here: %v", err)
	}
	region := &SharedRegion{r: r}
	defer func() {
		if err := region.Close(); err != nil {
			t.Error(err)
		}
	}()
	srv, pipe, stop := serveFromRegion(ctx, t, path, region, 0, 2)
	defer pipe.Close()
	for e := range 2 {
		got := arrowColumns(ctx, t, srv.cfg.SocketPath, true, false)
		sameColumns(t, fmt.Sprintf("epoch %d", e), got, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if srv.shmInPlace.Load() == 0 || srv.shmInline.Load() == 0 {
		t.Fatalf("%d batches in place, %d inline; want some of each", srv.shmInPlace.Load(), srv.shmInline.Load())
	}
}

// TestSharedRegionConsumerDies: a training process that dies holding
// batches sent in place (its socket closes, no frees come) leaves none of
// the region lent once the server and the pipeline are closed, and the
// next epoch is served whole.
func TestSharedRegionConsumerDies(t *testing.T) {
	ctx := testCtx(t)
	path, want := writeFeedFile(ctx, t, 150_000)
	region := newTestRegion(t)
	srv, pipe, stop := serveFromRegion(ctx, t, path, region, 0, 2)
	ep, err := DialArrow(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	var held []arrow.RecordBatch
	for range 10 {
		rec, err := ep.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, rec)
	}
	if srv.shmInPlace.Load() == 0 {
		t.Fatal("no batch went out in place")
	}
	_ = ep.shm.uc.Close() // dies: its frees never come
	sameColumns(t, "the epoch after", arrowColumns(ctx, t, srv.cfg.SocketPath, false, false), want)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	pipe.Close()
	if n := region.r.lentBytes(); n != 0 {
		t.Fatalf("%d bytes of the region still lent after the consumer died and the feed closed", n)
	}
	_ = held // the dead process's batches; its mapping is gone with it
}

// TestSharedRegionLends checks the lent space's size (the executor passes
// its read-ahead budget), its accounting, and that a closed region lends
// nothing.
func TestSharedRegionLends(t *testing.T) {
	for _, tc := range []struct{ ask, want int64 }{{0, MaxSharedLendBytes}, {-1, MaxSharedLendBytes},
		{1 << 20, 1 << 20}, {1 << 40, MaxSharedLendBytes}} {
		r, err := NewSharedRegion(tc.ask)
		if err != nil {
			t.Skipf("no shared memory here: %v", err)
		}
		if got := int64(len(r.r.mem)) - r.r.msgEnd; got != tc.want {
			t.Errorf("NewSharedRegion(%d) lends %d bytes, want %d", tc.ask, got, tc.want)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewSharedRegion(1 << 20)
	if err != nil {
		t.Skipf("no shared memory here: %v", err)
	}
	a, b := r.TryAllocate(600<<10), r.TryAllocate(600<<10)
	if a == nil || b != nil || !r.Owns(a) || r.Owns(make([]byte, 8)) {
		t.Fatalf("1 MiB lent: 600 KiB twice gave %v and %v, want room for one", a != nil, b != nil)
	}
	if err := r.Close(); err == nil {
		t.Fatal("Close with a buffer still lent did not say so")
	}
	r.Free(a)
	c := r.TryAllocate(1 << 20)
	if c == nil {
		t.Fatal("after the free, the whole lent space is not there again")
	}
	r.Free(c)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.TryAllocate(64) != nil {
		t.Fatal("a closed region lent space")
	}
	if err := r.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}
