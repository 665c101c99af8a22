package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
)

var heldSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// writeHeldRows writes rows 0..rows-1 (id and label) to an Arrow IPC file
// in batches of batchRows and returns each batch as a split.
func writeHeldRows(t *testing.T, rows, batchRows int64) []feed.Split {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rows.arrow")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(heldSchema))
	if err != nil {
		t.Fatal(err)
	}
	var splits []feed.Split
	for start := int64(0); start < rows; start += batchRows {
		b := array.NewRecordBuilder(memory.DefaultAllocator, heldSchema)
		for i := start; i < start+batchRows; i++ {
			b.Field(0).(*array.Int64Builder).Append(i)
			b.Field(1).(*array.Int64Builder).Append(i % 2)
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		splits = append(splits, feed.Split{URI: "file://" + path, Format: feed.FormatArrow, Batches: []int{len(splits)}, Rows: batchRows})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return splits
}

// holdingDriver answers HoldEpoch with what the test sends, after telling
// the test which epoch was asked about.
type holdingDriver struct {
	driverpb.ControlClient // only HoldEpoch is called
	asked                  chan int
	answers                chan *driverpb.HoldEpochResponse
}

func (d *holdingDriver) HoldEpoch(ctx context.Context, req *driverpb.HoldEpochRequest, _ ...grpc.CallOption) (*driverpb.HoldEpochResponse, error) {
	if req.GetExecutorId() != "exec-0" {
		return nil, fmt.Errorf("asked by %q, want exec-0", req.GetExecutorId())
	}
	select {
	case d.asked <- int(req.GetEpoch()):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case resp := <-d.answers:
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestHeldFeedServesALostRanksRest runs rank 0 of 2 behind a real feed
// socket, its task saying its epochs are held (FeedTask.hold_epochs), while
// rank 1 is lost after 2 batches of 20: the process reads all of rank 0's
// rows, sees no epoch end while the driver's answer is pending, then reads
// rank 1's rest and the end; the next epoch follows the smaller world's
// plan the driver sent with the rest (every split). Every row of epoch 0
// is read once by the survivor or was read by rank 1 before it was lost.
func TestHeldFeedServesALostRanksRest(t *testing.T) {
	const batch = 20
	splits := writeHeldRows(t, 200, batch)
	var schema bytes.Buffer
	w := ipc.NewWriter(&schema, ipc.WithSchema(heldSchema))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	drv := &holdingDriver{asked: make(chan int), answers: make(chan *driverpb.HoldEpochResponse)}
	asked, answers := drv.asked, drv.answers
	e := &Executor{cfg: Config{ID: "exec-0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, client: drv,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	task := &Task{Feed: &FeedTask{Mode: string(wire.ModeArrow), Schema: schema.Bytes(), Splits: driverpb.SplitsFromFeed(splits[:5]),
		LabelColumn: "label", BatchRows: batch, Epochs: 2, EvenBatches: string(feed.EvenOff), NoSharedMemory: true, HoldEpochs: true}}
	id := identity{rank: 0, worldSize: 2, peers: []*driverpb.Peer{{Rank: 0}, {Rank: 1}}}
	dir := t.TempDir()
	pf, err := e.pushedFeed(task, id, wire.ModeArrow, fsys.NewResolver(fsys.Options{}), dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.release()
	server, sock := pf.server, pf.path
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return server.Run(gctx) })
	defer func() {
		cancel()
		_ = g.Wait()
	}()

	var mu sync.Mutex
	var got []int64
	read := make(chan error, 1)
	go func() { read <- readHeldEpoch(ctx, sock, &mu, &got) }()
	if e := waitAsked(t, ctx, asked); e != 0 {
		t.Fatalf("asked whether epoch %d ends, want 0", e)
	}
	// The rank's own rows reach the process while its epoch is held.
	readRows := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	for readRows() < 100 {
		select {
		case err := <-read:
			t.Fatalf("the process's epoch ended before the driver answered (%v)", err)
		case <-ctx.Done():
			t.Fatal("the rank's own rows did not reach the process while its epoch was held")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The world is now rank 0 alone: from epoch 1 on it reads every split.
	answers <- &driverpb.HoldEpochResponse{
		Rest: driverpb.SegmentsFromFeed([]feed.Segment{{Splits: splits[5:], Rank: 1, RowStart: 2 * batch, RowEnd: 100}}),
		Next: &driverpb.FeedPlan{Splits: driverpb.SplitsFromFeed(splits)}}
	if e := waitAsked(t, ctx, asked); e != 0 {
		t.Fatalf("asked again for epoch %d, want 0 after the rest", e)
	}
	answers <- &driverpb.HoldEpochResponse{}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i := int64(0); i < 200; i++ {
		if i < 100 || i >= 100+2*batch {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("epoch 0 gave %v, want rank 0's rows and rank 1's from its third batch", got)
	}

	got = nil
	go func() { read <- readHeldEpoch(ctx, sock, &mu, &got) }()
	if e := waitAsked(t, ctx, asked); e != 1 {
		t.Fatalf("asked whether epoch %d ends, want 1", e)
	}
	answers <- &driverpb.HoldEpochResponse{}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	all := make([]int64, 200)
	for i := range all {
		all[i] = int64(i)
	}
	if !slices.Equal(got, all) {
		t.Fatalf("epoch 1 gave %d rows, want the smaller world's plan: all 200 in order", len(got))
	}
}

// waitAsked waits for the feed to ask whether an epoch ends.
func waitAsked(t *testing.T, ctx context.Context, asked <-chan int) int {
	t.Helper()
	select {
	case e := <-asked:
		return e
	case <-ctx.Done():
		t.Fatal("the feed never asked whether its epoch ends")
		return -1
	}
}

// readHeldEpoch reads one epoch off the feed socket, appending its ids.
func readHeldEpoch(ctx context.Context, sock string, mu *sync.Mutex, ids *[]int64) error {
	ep, err := wire.DialArrow(ctx, sock)
	if err != nil {
		return err
	}
	defer ep.Close()
	for {
		rec, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		a := rec.Column(0).(*array.Int64)
		mu.Lock()
		*ids = append(*ids, a.Int64Values()...)
		mu.Unlock()
		rec.Release()
	}
}

// noRows is a reader whose rows have run out.
type noRows struct{}

func (noRows) Schema() *arrow.Schema                           { return heldSchema }
func (noRows) Next(context.Context) (arrow.RecordBatch, error) { return nil, io.EOF }
func (noRows) Close() error                                    { return nil }

// TestHeldEpochWaitsForTheProcessUntilDealt: a rank's held epoch end waits
// for its process before it asks the driver, until the rank is dealt a
// lost rank's rest; after that it asks as soon as what it serves runs
// out. (A survivor dealt fewer batches than another waited at its end for
// the epoch to end, while the other's last step allreduced with it: the
// job hung.)
func TestHeldEpochWaitsForTheProcessUntilDealt(t *testing.T) {
	var dealt atomic.Bool
	asks := 0
	more := func(context.Context, int) (feed.Reader, error) {
		asks++
		if asks == 1 {
			dealt.Store(true) // heldSource.more, answered with a rest
			return noRows{}, nil
		}
		return nil, nil
	}
	r := &untilDealt{Reader: feed.HeldEpoch(noRows{}, 0, more), dealt: &dealt}
	var waits []int
	r.AskAfterTaken(func(context.Context) error {
		waits = append(waits, asks)
		return nil
	})
	if _, err := r.Next(context.Background()); err != io.EOF {
		t.Fatalf("Next: %v, want the epoch's end", err)
	}
	if asks != 2 || len(waits) != 1 || waits[0] != 0 {
		t.Fatalf("asked %d times, waiting for the process before asks %v; want 2 asks, a wait before the first only", asks, waits)
	}
}

// TestHeldEndHandsTheBiggerWorldFirst: when the driver ends a held epoch
// with the bigger world a newcomer joins (growing in place with input),
// the membership is handed to the process before the epoch's end is
// served, so that the process knows of it when it sees the end; a
// membership that cannot be handed fails the feed rather than ending the
// epoch in the old world.
func TestHeldEndHandsTheBiggerWorldFirst(t *testing.T) {
	m := &driverpb.Membership{Version: 3}
	var followed []*driverpb.Membership
	s := &heldSource{
		end: func(context.Context, int) (heldAnswer, error) { return heldAnswer{membership: m}, nil },
		follow: func(got *driverpb.Membership) error {
			followed = append(followed, got)
			return nil
		},
	}
	r, err := s.more(context.Background(), 0)
	if err != nil || r != nil {
		t.Fatalf("more = %v, %v; want the epoch's end", r, err)
	}
	if len(followed) != 1 || followed[0] != m {
		t.Fatalf("handed %v to the process, want the bigger world's membership once", followed)
	}
	s.follow = func(*driverpb.Membership) error { return fmt.Errorf("write the membership file: disk full") }
	if _, err := s.more(context.Background(), 1); err == nil {
		t.Fatal("the epoch ended though the process could not be handed the bigger world")
	}
}
