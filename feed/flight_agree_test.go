package feed

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestFlightDealEndpointsEven: under evenBatches pad and drop, a flight
// whose endpoints' rows are unknown is dealt whole and unread like under
// off, and the ranks, which hold different rows, agree through a tally on
// the batches each feeds: every rank yields the same number per epoch,
// over two epochs, with every endpoint fetched exactly once from a
// service whose streams can be read only once.
func TestFlightDealEndpointsEven(t *testing.T) {
	const batchRows = 256
	// Rank 0 gets endpoints 0 and 1 (1,400 rows: 5 full batches and a
	// short one), rank 1 endpoints 2 and 3 (2,600 rows: 10 and one).
	sizes := []int{300, 400, 600, 700}
	for _, tc := range []struct {
		mode    EvenMode
		batches int
	}{{EvenPad, 11}, {EvenDrop, 5}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			srv, res, plan, want := dealtFlight(t, sizes)
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
			defer cancel()
			tally := NewRowTally(2)
			batches := make([][2]int, 2) // by rank, by epoch
			seen := make([][2]map[int64]bool, 2)
			var g errgroup.Group
			for r := range 2 {
				pipe, err := NewPipeline(res, PipelineConfig{Splits: plan.Ranks[r], Schema: plan.Schema, LabelColumn: "label", Rank: r,
					BatchRows: batchRows, EvenBatches: tc.mode, Agree: tally.Rank(r), CacheBytes: 64 << 20, Prefetch: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer pipe.Close()
				g.Go(func() error {
					for epoch := range 2 {
						seen[r][epoch] = map[int64]bool{}
						n, err := readEpochIDs(ctx, pipe, epoch, batchRows, tc.mode == EvenDrop, seen[r][epoch])
						if err != nil {
							return err
						}
						batches[r][epoch] = n
					}
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			for epoch := range 2 {
				if batches[0][epoch] != tc.batches || batches[1][epoch] != tc.batches {
					t.Errorf("epoch %d: ranks fed %d and %d batches, want %d each", epoch, batches[0][epoch], batches[1][epoch], tc.batches)
				}
				if tc.mode == EvenPad && int64(len(seen[0][epoch])+len(seen[1][epoch])) != want {
					t.Errorf("epoch %d: %d distinct rows fed, want all %d", epoch, len(seen[0][epoch])+len(seen[1][epoch]), want)
				}
			}
			for i := range sizes {
				if n := srv.EndpointGets("etl", i); n != 1 {
					t.Errorf("endpoint %d fetched %d times, want once", i, n)
				}
			}
		})
	}
}

// readEpochIDs reads one epoch of pipe, noting the ids it feeds in seen,
// and returns its batches; full checks that every batch has batchRows
// rows.
func readEpochIDs(ctx context.Context, pipe *Pipeline, epoch, batchRows int, full bool, seen map[int64]bool) (int, error) {
	rd, err := pipe.Epoch(ctx, epoch)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	n := 0
	for {
		rec, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
		if full && rec.NumRows() != int64(batchRows) {
			rec.Release()
			return n, errors.New("a short batch under drop")
		}
		ids := rec.Column(0).(*array.Int64)
		for i := range ids.Len() {
			seen[ids.Value(i)] = true
		}
		rec.Release()
	}
}
