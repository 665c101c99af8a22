package driver

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestFeedRows: the workers' rows are answered once every worker has
// reported, by rank among the workers (a chief ahead of them shifts no
// share); a parameter server, which is fed nothing, is refused; a worker
// run again gets the rows first reported at once.
func TestFeedRows(t *testing.T) {
	g := rolesRoster(t, true) // exec-0 chief, exec-1 and exec-2 workers, exec-3 ps
	stop := make(chan struct{})
	defer close(stop)
	s := &controlServer{roster: g, rows: feed.NewRowTally(2), stop: stop, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()

	if _, err := s.FeedRows(ctx, &driverpb.FeedRowsRequest{ExecutorId: "exec-3", Rows: 5}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a parameter server's rows: %v, want refused", err)
	}
	second := make(chan []int64, 1)
	go func() {
		resp, err := s.FeedRows(ctx, &driverpb.FeedRowsRequest{ExecutorId: "exec-2", Rows: 700})
		if err != nil {
			t.Error(err)
		}
		second <- resp.GetRowsPerRank()
	}()
	select {
	case <-second:
		t.Fatal("answered before every worker reported")
	case <-s.rows.Done():
		t.Fatal("the tally is complete with one worker's rows")
	default:
	}
	resp, err := s.FeedRows(ctx, &driverpb.FeedRowsRequest{ExecutorId: "exec-1", Rows: 300})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{300, 700}
	if got := resp.GetRowsPerRank(); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if got := <-second; !slices.Equal(got, want) {
		t.Fatalf("the other worker got %v, want %v", got, want)
	}
	resp, err = s.FeedRows(ctx, &driverpb.FeedRowsRequest{ExecutorId: "exec-1", Rows: 999})
	if err != nil || !slices.Equal(resp.GetRowsPerRank(), want) {
		t.Fatalf("a worker run again: %v %v, want %v", resp.GetRowsPerRank(), err, want)
	}
}
