package e2e

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// TestFlightEndpointsFetchedOnce: with spindle.feed.evenBatches=off a
// flight of several endpoints that does not say their sizes is dealt by
// endpoint, never read by the driver: over a 2-epoch job on 2 ranks each
// endpoint is fetched exactly once (the second epoch from the executors'
// cache), from a service that serves each stream once, and every row is
// fed once per epoch.
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
	const endpoints, per = 4, 1000
	eps := make([][]arrow.RecordBatch, endpoints)
	for i := range eps {
		eps[i] = batch(i*per, per)
	}
	srv := flighttest.Start(t, "", map[string]flighttest.Flight{"etl/out": {Schema: schema, Endpoints: eps, Unsized: true, ReadOnce: true}})
	dir := t.TempDir()
	r := spindle(t, dir, submitArgs("--num-executors", "2", "--input", srv.URI("etl/out"), "--conf", "spindle.feed.evenBatches=off",
		"--label-column", "label", "--feed", "tensor", "--epochs", "2", "--", feedcheckBin)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	for i := range endpoints {
		if n := srv.EndpointGets("etl/out", i); n != 1 {
			t.Errorf("endpoint %d fetched %d times, want once", i, n)
		}
	}
	perEpoch := map[int]float64{}
	rows := map[int]int{}
	for _, l := range parseFeedcheck(t, r.stdout) {
		perEpoch[l.epoch] += l.sum
		rows[l.epoch] += l.rows
	}
	const total = endpoints * per
	const want = total * (total - 1) / 2 // the sum of x over every row
	for epoch := range 2 {
		if rows[epoch] != total || perEpoch[epoch] != want {
			t.Errorf("epoch %d: %d rows summing to %v, want %d rows summing to %d:\n%s", epoch, rows[epoch], perEpoch[epoch], total, want, r)
		}
	}
}
