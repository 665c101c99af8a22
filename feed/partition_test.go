package feed

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Partition values on the path become columns of every row, typed by
// their values, selectable like the file's own columns.
func TestPartitionColumns(t *testing.T) {
	dir := t.TempDir()
	type part struct {
		path   string
		format Format
		start  int64
	}
	parts := []part{
		{"dt=2026-11-01/hour=3", FormatParquet, 0},
		{"dt=2026-11-01/hour=4", FormatCSV, 10}, // not matched by the inputs below
		{"dt=2026-11-02/hour=3", FormatParquet, 20},
	}
	for _, p := range parts {
		if err := os.MkdirAll(filepath.Join(dir, p.path), 0o755); err != nil {
			t.Fatal(err)
		}
		switch p.format {
		case FormatParquet:
			writeParquet(t, filepath.Join(dir, p.path, "part-0.parquet"), testSchema, p.start, 10, 4)
		case FormatCSV:
			writeText(t, filepath.Join(dir, p.path, "part-0.csv"), csvTextOpts(p.start, 10, true, false))
		}
	}
	ctx := context.Background()
	res := newResolver()
	defer res.Close()
	for _, tc := range []struct {
		name    string
		format  Format
		columns []string
		label   string
		want    string // column names of the plan
	}{
		{"parquet, every column", FormatParquet, nil, "label", "id,x,name,dt,hour,label"},
		{"selected", FormatParquet, []string{"hour", "id"}, "label", "hour,id,label"},
		{"partition as label", FormatParquet, []string{"id"}, "hour", "id,hour"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inputs := []string{filepath.Join(dir, "dt=*/hour=3")}
			plan, err := Plan(ctx, res, PlanRequest{Inputs: inputs, Ranks: 2, Columns: tc.columns, LabelColumn: tc.label,
				PartitionColumns: []string{"dt", "hour"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(FieldNames(plan.Schema), ","); got != tc.want {
				t.Fatalf("columns %s, want %s", got, tc.want)
			}
			if f, _ := plan.Schema.FieldsByName("hour"); f[0].Type.ID() != arrow.INT64 {
				t.Fatalf("hour is %s, want int64 (every value is an integer)", f[0].Type)
			}
			if f, _ := plan.Schema.FieldsByName("dt"); len(f) > 0 && f[0].Type.ID() != arrow.STRING {
				t.Fatalf("dt is %s, want utf8", f[0].Type)
			}
			rows := 0
			for _, splits := range plan.Ranks {
				for _, s := range splits {
					rd, err := OpenSplit(ctx, res, s, ReadOptions{Schema: plan.Schema, Columns: tc.columns, LabelColumn: tc.label, BatchRows: 3})
					if err != nil {
						t.Fatal(err)
					}
					wantDT := s.Partitions["dt"]
					for {
						rec, err := rd.Next(ctx)
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						if !rec.Schema().Equal(plan.Schema) {
							t.Fatalf("batch schema %v, want %v", rec.Schema(), plan.Schema)
						}
						for i := 0; i < int(rec.NumRows()); i++ {
							if h := rec.Column(rec.Schema().FieldIndices("hour")[0]).(*array.Int64).Value(i); h != 3 {
								t.Fatalf("hour %d, want 3", h)
							}
							if idx := rec.Schema().FieldIndices("dt"); len(idx) > 0 {
								if dt := rec.Column(idx[0]).(*array.String).Value(i); dt != wantDT {
									t.Fatalf("dt %q, want %q", dt, wantDT)
								}
							}
						}
						rows += int(rec.NumRows())
						rec.Release()
					}
					rd.Close()
				}
			}
			if rows != 20 {
				t.Fatalf("read %d rows, want 20", rows)
			}
		})
	}

	// A file without the key on its path, and a column the partition would hide.
	writeParquet(t, filepath.Join(dir, "stray.parquet"), testSchema, 100, 5, 5)
	_, err := Plan(ctx, res, PlanRequest{Inputs: []string{dir}, Ranks: 1, PartitionColumns: []string{"dt"}})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "stray.parquet has no dt=VALUE directory") {
		t.Fatalf("err = %v", err)
	}
	hide := filepath.Join(t.TempDir(), "id=5")
	if err := os.MkdirAll(hide, 0o755); err != nil {
		t.Fatal(err)
	}
	writeParquet(t, filepath.Join(hide, "part-0.parquet"), testSchema, 0, 5, 5)
	_, err = Plan(ctx, res, PlanRequest{Inputs: []string{hide}, Ranks: 1, PartitionColumns: []string{"id"}})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), `has a column "id" and a id=VALUE directory`) {
		t.Fatalf("a partition key that is also a column: err = %v", err)
	}
}

func TestPartitionValues(t *testing.T) {
	got := PartitionValues("/data/t/dt=2026-11-01/city=S%C3%A3o%20Paulo/x=/part-0.parquet")
	if got["dt"] != "2026-11-01" || got["city"] != "São Paulo" || len(got) != 3 {
		t.Fatalf("partitionValues = %v", got)
	}
}
