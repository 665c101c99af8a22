package push

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/feed"
)

// TestPushJournalReplaysRank: with a journal, a rank's stream opened again
// while the first is still open (its executor lost mid-stream) ends the
// first and sends the rank every row the first was sent, in the same
// order, then the rows pushed after; opened once more after the end of
// input it sends the whole share again. Close removes the journals.
func TestPushJournalReplaysRank(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := startPush(t, Config{Ranks: 2, BatchRows: 10, Schema: flightSchema, JournalDir: dir})
	_, c := dialPush(t, s.Addr())
	ticket := &flight.Ticket{Ticket: []byte(feed.PushTicketPrefix + "1")}
	open := func(ctx context.Context) *flight.Reader {
		t.Helper()
		stream, err := c.DoGet(bearer(ctx, testFeedToken), ticket)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := flight.NewRecordReader(stream)
		if err != nil {
			t.Fatal(err)
		}
		return rd
	}
	// ids reads n batches (n < 0: to the end) and returns their ids.
	ids := func(rd *flight.Reader, n int) []int64 {
		t.Helper()
		var out []int64
		for ; n != 0 && rd.Next(); n-- {
			col := rd.RecordBatch().Column(0).(*array.Int64)
			out = append(out, col.Int64Values()...)
		}
		if n > 0 {
			t.Fatalf("stream ended %d batches early: %v", n, rd.Err())
		}
		if n < 0 && rd.Err() != nil && !errors.Is(rd.Err(), io.EOF) {
			t.Fatal(rd.Err())
		}
		return out
	}
	// Rank 1 is dealt ids 10-19, 30-39, 50-59, 70-79 of 8 batches.
	if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 4, 10), nil); err != nil {
		t.Fatal(err)
	}
	firstCtx, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	first := open(firstCtx)
	sent := ids(first, 2)
	if len(sent) != 20 || sent[0] != 10 || sent[10] != 30 {
		t.Fatalf("rank 1's first stream got %v", sent)
	}
	second := open(ctx)
	// The first stream was ended by the second.
	if first.Next() {
		t.Fatalf("the replaced stream went on with %v", first.RecordBatch())
	}
	if status.Code(first.Err()) != codes.Unavailable {
		t.Fatalf("the replaced stream ended with %v, want Unavailable", first.Err())
	}
	first.Release()
	if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(40, 4, 10), nil); err != nil {
		t.Fatal(err)
	}
	s.EndInput()
	got := ids(second, -1)
	second.Release()
	want := []int64{}
	for _, start := range []int64{10, 30, 50, 70} {
		for id := start; id < start+10; id++ {
			want = append(want, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the stream opened again got %v, want %v", got, want)
	}
	third := open(ctx)
	if again := ids(third, -1); !slices.Equal(again, want) {
		t.Fatalf("the stream opened after the end got %v, want %v", again, want)
	}
	third.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("journals left after Close: %v", left)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// TestPushJournalBroken: a journal that cannot be written does not stop
// the rank's stream, but a later stream of the rank is refused, naming
// why, rather than sent a share with rows missing.
func TestPushJournalBroken(t *testing.T) {
	ctx := context.Background()
	s := startPush(t, Config{Ranks: 1, BatchRows: 10, Schema: flightSchema, JournalDir: filepath.Join(t.TempDir(), "gone")})
	_, c := dialPush(t, s.Addr())
	if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 2, 10), nil); err != nil {
		t.Fatal(err)
	}
	s.EndInput()
	ticket := &flight.Ticket{Ticket: []byte(feed.PushTicketPrefix + "0")}
	read := func() (int64, error) {
		stream, err := c.DoGet(bearer(ctx, testFeedToken), ticket)
		if err != nil {
			return 0, err
		}
		rd, err := flight.NewRecordReader(stream)
		if err != nil {
			return 0, err
		}
		defer rd.Release()
		var n int64
		for rd.Next() {
			n += rd.RecordBatch().NumRows()
		}
		return n, rd.Err()
	}
	if n, err := read(); n != 20 || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("the first stream got %d rows (%v), want 20", n, err)
	}
	if _, err := read(); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "cannot be sent again") {
		t.Fatalf("a stream opened again without its journal: %v", err)
	}
}
