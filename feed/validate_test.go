package feed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// TestValidateBatchNamesColumn: every kind of damage is an error naming
// its column, never a panic.
func TestValidateBatchNamesColumn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets []int32
		values  string
	}{
		{"backwards", []int32{0, 3, 1, 3, 4}, "abcd"},
		{"past the values inside", []int32{0, 9, 2, 3, 4}, "abcd"},
		{"negative", []int32{-2, 1, 2, 3, 4}, "abcd"},
		{"invalid utf-8", []int32{0, 1, 2, 3, 4}, "ab\xffd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateBatch(flighttest.NameBatch(4, tc.offsets, tc.values))
			if err == nil || !strings.Contains(err.Error(), `column "name"`) {
				t.Fatalf("got %v, want an error naming column \"name\"", err)
			}
		})
	}
	if err := ValidateBatch(flighttest.NameBatch(4, []int32{0, 1, 2, 3, 4}, "abcd")); err != nil {
		t.Fatalf("a good batch: %v", err)
	}
}

// TestValidateBatchRowsWithoutValues: a batch without columns, or whose
// only column is of type null, can claim any number of rows in no bytes;
// one claiming more than its buffers hold at a bit a row is refused (it
// would be cut and dealt for ever), a small one passes.
func TestValidateBatchRowsWithoutValues(t *testing.T) {
	nulls := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.Null, Nullable: true}}, nil)
	for _, tc := range []struct {
		name string
		rec  arrow.RecordBatch
		ok   bool
	}{
		{"no columns", array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 1<<40), false},
		{"a null column", array.NewRecordBatch(nulls, []arrow.Array{array.NewNull(1 << 40)}, 1<<40), false},
		{"a few null rows", array.NewRecordBatch(nulls, []arrow.Array{array.NewNull(10)}, 10), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateBatch(tc.rec)
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "rows in 0 bytes")) {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestFlightRefusesMalformedBatch: a Flight service (grpc://) sends a
// batch whose string offsets run past its values: the rank reading it
// gets an input error naming the column, not a panic.
func TestFlightRefusesMalformedBatch(t *testing.T) {
	srv := flighttest.Start(t, "s3cret", map[string]flighttest.Flight{
		"names": {Schema: flighttest.NameSchema, Endpoints: [][]arrow.RecordBatch{{
			flighttest.NameBatch(4, []int32{0, 1, 2, 3, 4}, "abcd"), flighttest.NameBatch(4, []int32{0, 9, 2, 3, 4}, "abcd"),
		}}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	opts := FlightOptions{Token: "s3cret"}
	plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{srv.URI("names")}, Ranks: 1, Columns: []string{"name"}, LabelColumn: "label", Flight: opts})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := OpenSplit(ctx, res, plan.Ranks[0][0], ReadOptions{Columns: []string{"name"}, LabelColumn: "label", Schema: plan.Schema, BatchRows: 1, Flight: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rows := 0
	for {
		rec, err := rd.Next(ctx)
		if err != nil {
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), `column "name"`) {
				t.Fatalf("after %d rows: %v, want an input error naming column \"name\"", rows, err)
			}
			break
		}
		rows += int(rec.NumRows())
		rec.Release()
	}
	if rows != 4 {
		t.Fatalf("%d rows read before the malformed batch, want 4", rows)
	}
}
