package executor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/push"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
)

var turnSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)

// pushTurn pushes ids [first, first+n) into turn turn of the endpoint at
// addr, as one named producer, and ends the turn.
func pushTurn(ctx context.Context, t *testing.T, addr string, turn int, first, n int64) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := flight.NewClientFromConn(conn, nil)
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer producer")
	stream, err := c.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(turnSchema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"turn", strconv.Itoa(turn), "p"}})
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := first; i < first+n; i++ {
		b.Append(i)
	}
	col := b.NewArray()
	rec := array.NewRecordBatch(turnSchema, []arrow.Array{col}, n)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	col.Release()
	b.Release()
	w.Close()
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	drainCall(t, func() error { _, err := stream.Recv(); return err })
	act, err := c.DoAction(ctx, &flight.Action{Type: push.ActionEndOfInput, Body: []byte(strconv.Itoa(turn))})
	if err != nil {
		t.Fatal(err)
	}
	drainCall(t, func() error { _, err := act.Recv(); return err })
}

// drainCall receives a call's answers until it ends, failing the test
// when it ends in an error.
func drainCall(t *testing.T, recv func() error) {
	t.Helper()
	for {
		if err := recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			return
		}
	}
}

// readEpoch returns the ids of one epoch of src.
func readEpoch(ctx context.Context, t *testing.T, src *turnSource, epoch int) []int64 {
	t.Helper()
	rd, err := src.Epoch(ctx, epoch)
	if err != nil {
		t.Fatalf("epoch %d: %v", epoch, err)
	}
	defer rd.Close()
	var ids []int64
	for {
		rec, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return ids
		}
		if err != nil {
			t.Fatalf("epoch %d: %v", epoch, err)
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
}

// TestTurnSourceReadsEachTurnOnce: a warm session's rank reads turn N's
// pushed rows in its first epoch and the turn's later epochs from its
// cache (the endpoint sends a turn's rows once), and the next turn's
// epochs get that turn's rows only.
func TestTurnSourceReadsEachTurnOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := push.Start(lis, push.Config{Ranks: 1, BatchRows: 16, Schema: turnSchema, Turns: true,
		ProducerToken: "producer", FeedToken: "feed", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	plan, err := srv.Plan(ctx, srv.Addr(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	src, err := newTurnSource(res, feed.PipelineConfig{Splits: plan.Ranks[0], Schema: plan.Schema, BatchRows: 16,
		EvenBatches: feed.EvenOff, CacheBytes: 1 << 20, Flight: feed.FlightOptions{PushToken: "feed"}}, 2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, tc := range []struct {
		turn  int
		first int64
	}{{1, 0}, {2, 1000}} {
		pushTurn(ctx, t, srv.Addr(), tc.turn, tc.first, 100)
		want := make([]int64, 100)
		for i := range want {
			want[i] = tc.first + int64(i)
		}
		for e := 2 * (tc.turn - 1); e < 2*tc.turn; e++ {
			if got := readEpoch(ctx, t, src, e); !slices.Equal(got, want) {
				t.Fatalf("turn %d, epoch %d: ids %v, want %d to %d", tc.turn, e, got, tc.first, tc.first+99)
			}
		}
		if st := src.Stats(); st.CacheHits != 1 {
			t.Fatalf("turn %d: %d cache hits, want its second epoch from the cache", tc.turn, st.CacheHits)
		}
	}
}
