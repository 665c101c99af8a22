package feed

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// TestFlightDealEndpoints: a flight of several endpoints that does not say
// how many rows each holds, planned with DealEndpoints, is dealt to ranks
// as whole endpoints without a DoGet at planning; two epochs on two ranks
// fetch every endpoint exactly once (the second epoch comes from the
// cache) and feed every row once per epoch, from a service whose streams
// can be read only once.
func TestFlightDealEndpoints(t *testing.T) {
	const endpoints = 5
	srv, res, plan, want := dealtFlight(t, []int{300, 400, 500, 600, 700})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	if len(plan.Ranks[0]) != 3 || len(plan.Ranks[1]) != 2 {
		t.Fatalf("ranks hold %d and %d endpoints, want 3 and 2", len(plan.Ranks[0]), len(plan.Ranks[1]))
	}
	pipes := make([]*Pipeline, 2)
	for r := range pipes {
		var err error
		pipes[r], err = NewPipeline(res, PipelineConfig{Splits: plan.Ranks[r], Schema: plan.Schema, LabelColumn: "label",
			BatchRows: 256, EvenBatches: EvenOff, CacheBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer pipes[r].Close()
	}
	for epoch := range 2 {
		seen := map[int64]int{}
		for _, p := range pipes {
			rd, err := p.Epoch(ctx, epoch)
			if err != nil {
				t.Fatal(err)
			}
			for {
				rec, err := rd.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("epoch %d: %v", epoch, err)
				}
				ids := rec.Column(0).(*array.Int64)
				for i := range ids.Len() {
					seen[ids.Value(i)]++
				}
				rec.Release()
			}
			rd.Close()
		}
		if int64(len(seen)) != want {
			t.Fatalf("epoch %d: %d distinct rows fed, want %d", epoch, len(seen), want)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("epoch %d: row %d fed %d times", epoch, id, n)
			}
		}
	}
	for i := range endpoints {
		if n := srv.EndpointGets("etl", i); n != 1 {
			t.Errorf("endpoint %d fetched %d times, want once", i, n)
		}
	}
}

// TestFlightDealEndpointsTooFew: fewer endpoints than ranks is a clear
// input error, since whole endpoints are dealt.
func TestFlightDealEndpointsTooFew(t *testing.T) {
	srv := flighttest.Start(t, "", map[string]flighttest.Flight{"etl": {Schema: flightSchema,
		Endpoints: [][]arrow.RecordBatch{flightBatches(0, 1, 10), flightBatches(10, 1, 10)}, Unsized: true}})
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	_, err := Plan(context.Background(), res, PlanRequest{Inputs: []string{srv.URI("etl")}, Ranks: 3, DealEndpoints: true})
	if !errors.Is(err, ErrInput) {
		t.Fatalf("3 ranks, 2 endpoints: %v, want an input error", err)
	}
}

// dealtFlight serves a flight, without counts and whose streams can be
// read once, whose endpoint i holds two batches of sizes[i] rows, plans it
// for 2 ranks by whole endpoints, checks that planning fetched nothing,
// and returns the server, the resolver, the plan and the flight's rows.
func dealtFlight(t *testing.T, sizes []int) (*flighttest.Server, *fsys.Resolver, *JobPlan, int64) {
	t.Helper()
	eps := make([][]arrow.RecordBatch, len(sizes))
	var rows int64
	for i, n := range sizes {
		eps[i] = flightBatches(rows, 2, n)
		rows += int64(2 * n)
	}
	srv := flighttest.Start(t, "", map[string]flighttest.Flight{"etl": {Schema: flightSchema, Endpoints: eps, Unsized: true, ReadOnce: true}})
	res := fsys.NewResolver(fsys.Options{})
	t.Cleanup(func() { res.Close() })
	plan, err := Plan(context.Background(), res, PlanRequest{Inputs: []string{srv.URI("etl")}, Ranks: 2, LabelColumn: "label", DealEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Gets.Load(); n != 0 {
		t.Fatalf("planning made %d DoGet calls, want none", n)
	}
	return srv, res, plan, rows
}
