package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// TestFlightInput: a job fed straight from an Arrow Flight service (an ETL
// pipeline's output, no files): two ranks read the flight's two endpoints,
// every row once per epoch, the token from a properties file; a wrong
// token and a missing flight are bad input, named.
func TestFlightInput(t *testing.T) {
	t.Parallel()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "label", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	batches := func(first, n int) []arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for id := first; id < first+n; id++ {
			b.Field(0).(*array.Int64Builder).Append(int64(id))
			b.Field(1).(*array.Float64Builder).Append(float64(id))
			b.Field(2).(*array.Float64Builder).Append(float64(id % 2))
		}
		return []arrow.RecordBatch{b.NewRecordBatch()}
	}
	srv := flighttest.Start(t, "etl-token", map[string]flighttest.Flight{
		"clicks/2026-11-24": {Schema: schema, Endpoints: [][]arrow.RecordBatch{batches(0, 2500), batches(2500, 1500)}, Unsized: true},
	})
	dir := t.TempDir()
	props := filepath.Join(dir, "flight.conf")
	writeFile(t, props, "spindle.flight.token etl-token\n")

	r := spindle(t, dir, submitArgs("--num-executors", "2", "--input", srv.URI("clicks/2026-11-24"), "--properties-file", props,
		"--columns", "x", "--label-column", "label", "--feed", "tensor", "--epochs", "2",
		// Each row once: the endpoints have no counts, so under pad (the
		// default) the rank with fewer rows would repeat some
		// (TestFlightEndpointsFetchedOnce checks pad and drop).
		"--conf", "spindle.feed.evenBatches=off", "--", feedcheckBin)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if strings.Contains(r.stdout+r.stderr, "etl-token") {
		t.Fatalf("the token appears in the output:\n%s", r)
	}
	perEpoch := map[int]float64{}
	rows := map[int]int{}
	for _, l := range parseFeedcheck(t, r.stdout) {
		perEpoch[l.epoch] += l.sum
		rows[l.epoch] += l.rows
	}
	const want = 4000 * 3999 / 2 // the sum of x over every row
	for epoch := 0; epoch < 2; epoch++ {
		if rows[epoch] != 4000 || perEpoch[epoch] != want {
			t.Errorf("epoch %d: %d rows summing to %v, want 4000 rows summing to %d:\n%s", epoch, rows[epoch], perEpoch[epoch], want, r)
		}
	}

	for _, tc := range []struct {
		name  string
		input string
		conf  string
		want  string
	}{
		{"wrong token", srv.URI("clicks/2026-11-24"), "spindle.flight.token=guess", "spindle.flight.token"},
		{"no such flight", srv.URI("clicks/1999-01-01"), "spindle.flight.token=etl-token", "clicks/1999-01-01"},
		{"direct mode", srv.URI("clicks/2026-11-24"), "spindle.feed.mode=direct", "--feed arrow or tensor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := spindle(t, dir, submitArgs("--input", tc.input, "--conf", tc.conf, "--", feedcheckBin)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("want exit 2 naming %q:\n%s", tc.want, r)
			}
		})
	}
}
