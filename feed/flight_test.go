package feed

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

var flightSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Float32},
	{Name: "label", Type: arrow.PrimitiveTypes.Float32},
}, nil)

// flightBatches makes n batches of rows rows with ids from first.
func flightBatches(first int64, n, rows int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	b := array.NewRecordBuilder(memory.DefaultAllocator, flightSchema)
	defer b.Release()
	id := first
	for range n {
		for range rows {
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.Float32Builder).Append(float32(id) / 2)
			b.Field(2).(*array.Float32Builder).Append(float32(id % 2))
			id++
		}
		out = append(out, b.NewRecordBatch())
	}
	return out
}

// TestFlightPlanAndRead: a flight's endpoints are dealt to ranks like a
// file's rows, and the ranks together read every row exactly once, with
// the selected columns, whether the flight says its size or not.
func TestFlightPlanAndRead(t *testing.T) {
	srv := flighttest.Start(t, "s3cret", map[string]flighttest.Flight{
		"clicks/sized":   {Schema: flightSchema, Endpoints: [][]arrow.RecordBatch{flightBatches(0, 3, 1000)}},
		"clicks/unsized": {Schema: flightSchema, Endpoints: [][]arrow.RecordBatch{flightBatches(0, 3, 1000), flightBatches(3000, 2, 700)}, Unsized: true},
	})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	opts := FlightOptions{Token: "s3cret"}
	for name, want := range map[string]int64{"clicks/sized": 3000, "clicks/unsized": 4400} {
		t.Run(name, func(t *testing.T) {
			before := srv.Gets.Load()
			plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{srv.URI(name)}, Ranks: 3, Columns: []string{"id"}, LabelColumn: "label", Flight: opts})
			if err != nil {
				t.Fatal(err)
			}
			counted := srv.Gets.Load() - before
			if name == "clicks/sized" && counted != 0 {
				t.Errorf("a flight that says its size was read %d times to plan it", counted)
			}
			if plan.TotalRows != want || plan.Schema.NumFields() != 2 || plan.Schema.Field(1).Name != "label" {
				t.Fatalf("plan: %d rows, schema %v", plan.TotalRows, plan.Schema)
			}
			seen := map[int64]int{}
			for r, splits := range plan.Ranks {
				var rows int64
				for _, s := range splits {
					if len(s.Ticket) == 0 || s.Format != FormatFlight {
						t.Fatalf("split %+v", s)
					}
					rd, err := OpenSplit(ctx, res, s, ReadOptions{Columns: []string{"id"}, LabelColumn: "label", Schema: plan.Schema, BatchRows: 256, Flight: opts})
					if err != nil {
						t.Fatal(err)
					}
					for {
						rec, err := rd.Next(ctx)
						if err != nil {
							break
						}
						ids := rec.Column(0).(*array.Int64)
						for i := 0; i < ids.Len(); i++ {
							seen[ids.Value(i)]++
						}
						rows += rec.NumRows()
						rec.Release()
					}
					rd.Close()
				}
				if rows != plan.RowsPerRank[r] {
					t.Errorf("rank %d read %d rows, planned %d", r, rows, plan.RowsPerRank[r])
				}
			}
			if int64(len(seen)) != want {
				t.Fatalf("%d distinct rows read, want %d", len(seen), want)
			}
			for id, n := range seen {
				if n != 1 {
					t.Fatalf("row %d read %d times", id, n)
				}
			}
		})
	}

	for name, tc := range map[string]struct {
		input string
		opts  FlightOptions
		want  error
		text  string
	}{
		"wrong token":  {srv.URI("clicks/sized"), FlightOptions{Token: "guess"}, ErrInput, "spindle.flight.token"},
		"no token":     {srv.URI("clicks/sized"), FlightOptions{}, ErrInput, "refused"},
		"no flight":    {srv.URI("clicks/nope"), opts, ErrInput, "clicks/nope"},
		"no path":      {"grpc://" + srv.Addr(), opts, ErrInput, "names no flight"},
		"unreachable":  {"grpc://127.0.0.1:1/clicks", opts, ErrUnavailable, "127.0.0.1:1"},
		"mixed inputs": {srv.URI("clicks/sized") + "," + "data/x.parquet", opts, ErrInput, "mixed"},
	} {
		t.Run(name, func(t *testing.T) {
			inputs := strings.Split(tc.input, ",")
			_, err := Plan(ctx, res, PlanRequest{Inputs: inputs, Ranks: 1, Flight: tc.opts, RetryUnavailable: -1})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %v, want %v naming %q", err, tc.want, tc.text)
			}
		})
	}
}

// TestFlightEpochsFromDisk: a pulled flight that outgrows the memory cache
// is fetched once and read back from the spill files in later epochs; with
// no spill room it is fetched every epoch. The rows are the same.
func TestFlightEpochsFromDisk(t *testing.T) {
	srv := flighttest.Start(t, "s3cret", map[string]flighttest.Flight{
		"clicks": {Schema: flightSchema, Endpoints: [][]arrow.RecordBatch{flightBatches(0, 4, 1000)}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	opts := FlightOptions{Token: "s3cret"}
	plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{srv.URI("clicks")}, Ranks: 1, Columns: []string{"x"}, LabelColumn: "label", Flight: opts})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spill int64
		gets  int64 // over three epochs
	}{{"spilled", 64 << 20, 1}, {"no spill", 0, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "spill")
			p, err := NewPipeline(res, PipelineConfig{Splits: plan.Ranks[0], Schema: plan.Schema, Columns: []string{"x"}, LabelColumn: "label",
				BatchRows: 500, EvenBatches: EvenOff, CacheBytes: 1 << 10, SpillDir: dir, SpillBytes: tc.spill, Flight: opts})
			if err != nil {
				t.Fatal(err)
			}
			before := srv.Gets.Load()
			var sums []float64
			for epoch := range 3 {
				r, err := p.Epoch(ctx, epoch)
				if err != nil {
					t.Fatal(err)
				}
				var sum float64
				for {
					rec, err := r.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("epoch %d: %v", epoch, err)
					}
					for _, v := range rec.Column(0).(*array.Float32).Float32Values() {
						sum += float64(v)
					}
					rec.Release()
				}
				r.Close()
				sums = append(sums, sum)
			}
			if got := srv.Gets.Load() - before; got != tc.gets {
				t.Errorf("the flight was fetched %d times over three epochs, want %d", got, tc.gets)
			}
			if want := float64(3999*4000/2) / 2; sums[0] != want || sums[1] != want || sums[2] != want {
				t.Errorf("epochs' sums of x %v, want %v each", sums, want)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the spill directory outlived the pipeline: %v", err)
			}
		})
	}
}
