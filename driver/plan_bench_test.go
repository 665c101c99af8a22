package driver

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// BenchmarkPlanFlightEndpoints is the driver planning a flight of 1,000
// endpoints of 1,000 rows each, whose FlightInfo gives no per-endpoint
// counts, for 2 ranks, under each spindle.feed.evenBatches mode: what it
// spends before training starts. It reports the DoGet calls made per plan
// (dgets/op): none, in every mode.
func BenchmarkPlanFlightEndpoints(b *testing.B) {
	const endpoints, rows = 1000, 1000
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	eps := make([][]arrow.RecordBatch, endpoints)
	for i := range eps {
		for j := range rows {
			bld.Field(0).(*array.Float64Builder).Append(float64(i*rows + j))
		}
		eps[i] = []arrow.RecordBatch{bld.NewRecordBatch()}
	}
	srv := flighttest.Start(b, "", map[string]flighttest.Flight{"wide": {Schema: schema, Endpoints: eps, Unsized: true}})
	for _, mode := range []feed.EvenMode{feed.EvenOff, feed.EvenPad, feed.EvenDrop} {
		b.Run(string(mode), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Inputs, cfg.NumExecutors, cfg.EvenBatches = []string{srv.URI("wide")}, 2, mode
			cfg.Command, cfg.Logger = []string{"true"}, slog.New(slog.NewTextHandler(io.Discard, nil))
			d, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			before := srv.Gets.Load()
			for range b.N {
				plan, err := d.Plan(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if n := len(plan.Ranks[0]) + len(plan.Ranks[1]); n != endpoints {
					b.Fatalf("planned %d endpoints, want %d", n, endpoints)
				}
			}
			b.ReportMetric(float64(srv.Gets.Load()-before)/float64(b.N), "dgets/op")
		})
	}
}
