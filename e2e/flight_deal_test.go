package e2e

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// TestFlightEndpointsFetchedOnce: under every spindle.feed.evenBatches
// mode a flight of several endpoints that does not say their sizes is
// dealt by endpoint, never read by the driver: over a 2-epoch job on 2
// ranks each endpoint is fetched exactly once (the second epoch from the
// executors' cache), from a service that serves each stream once. Under
// off every row is fed once per epoch; under pad and drop the ranks,
// whose endpoints hold different rows, feed the same number of batches
// (pad every row, drop full batches only).
func TestFlightEndpointsFetchedOnce(t *testing.T) {
	t.Parallel()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "label", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	batch := func(first, n int) []arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for id := first; id < first+n; id++ {
			b.Field(0).(*array.Float64Builder).Append(float64(id))
			b.Field(1).(*array.Float64Builder).Append(float64(id % 2))
		}
		return []arrow.RecordBatch{b.NewRecordBatch()}
	}
	// Rank 0 gets endpoints 0 and 1 (2,000 rows: 7 full batches of 256
	// and a short one), rank 1 endpoints 2 and 3 (3,000 rows: 11 and one).
	sizes := []int{900, 1100, 1400, 1600}
	const batchRows = 256
	for _, tc := range []struct {
		mode    string
		batches int // per rank and epoch; 0: each its own
	}{{"off", 0}, {"pad", 12}, {"drop", 7}} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			eps := make([][]arrow.RecordBatch, len(sizes))
			total := 0
			for i, n := range sizes {
				eps[i] = batch(total, n)
				total += n
			}
			srv := flighttest.Start(t, "", map[string]flighttest.Flight{"etl/out": {Schema: schema, Endpoints: eps, Unsized: true, ReadOnce: true}})
			dir := t.TempDir()
			r := spindle(t, dir, submitArgs("--num-executors", "2", "--input", srv.URI("etl/out"), "--conf", "spindle.feed.evenBatches="+tc.mode,
				"--label-column", "label", "--feed", "tensor", "--batch-rows", fmt.Sprint(batchRows), "--epochs", "2", "--", feedcheckBin)...)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			for i := range sizes {
				if n := srv.EndpointGets("etl/out", i); n != 1 {
					t.Errorf("endpoint %d fetched %d times, want once", i, n)
				}
			}
			sums := map[int]float64{}
			rows := map[int]int{}
			lines := parseFeedcheck(t, r.stdout)
			if len(lines) != 4 {
				t.Fatalf("%d epochs reported, want 2 per rank:\n%s", len(lines), r)
			}
			for _, l := range lines {
				sums[l.epoch] += l.sum
				rows[l.epoch] += l.rows
				if tc.batches > 0 && l.batches != tc.batches {
					t.Errorf("rank %d epoch %d: %d batches, want %d like every rank", l.rank, l.epoch, l.batches, tc.batches)
				}
				if tc.mode == "drop" && l.rows != tc.batches*batchRows {
					t.Errorf("rank %d epoch %d: %d rows, want %d full batches", l.rank, l.epoch, l.rows, tc.batches)
				}
			}
			want := float64(total * (total - 1) / 2) // the sum of x over every row
			for epoch := range 2 {
				switch tc.mode {
				case "off":
					if rows[epoch] != total || sums[epoch] != want {
						t.Errorf("epoch %d: %d rows summing to %v, want %d rows summing to %v:\n%s", epoch, rows[epoch], sums[epoch], total, want, r)
					}
				case "pad":
					// Rank 0 repeats its first 1,000 rows (0..999) to
					// match rank 1's 3,000 rows.
					if rows[epoch] != 6000 || sums[epoch] != want+999*1000/2 {
						t.Errorf("epoch %d: %d rows summing to %v, want 6000 summing to %v:\n%s", epoch, rows[epoch], sums[epoch], want+999*1000/2, r)
					}
				}
			}
		})
	}
}
