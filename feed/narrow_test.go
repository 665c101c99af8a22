package feed

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/spindle-ml/spindle/fsys"
)

// checkNarrowed checks that got holds want's rows in the columns named
// (every one of want's when none is), found by name, with every float64
// column but label as float32: each value converted, each null kept.
func checkNarrowed(t *testing.T, got, want arrow.RecordBatch, label string, names ...string) {
	t.Helper()
	if got.NumRows() != want.NumRows() || got.NumCols() != want.NumCols() {
		t.Fatalf("%d rows of %d columns, want %d of %d", got.NumRows(), got.NumCols(), want.NumRows(), want.NumCols())
	}
	if len(names) == 0 {
		for _, f := range want.Schema().Fields() {
			names = append(names, f.Name)
		}
	}
	for _, name := range names {
		wc, gc := want.Schema().FieldIndices(name), got.Schema().FieldIndices(name)
		if len(wc) != 1 || len(gc) != 1 {
			t.Fatalf("no column %s", name)
		}
		wa, ga, gt := want.Column(wc[0]), got.Column(gc[0]), got.Schema().Field(gc[0]).Type
		if !arrow.TypeEqual(gt, ga.DataType()) {
			t.Fatalf("column %s is %s in a batch of schema %s", name, ga.DataType(), gt)
		}
		w, ok := wa.(*array.Float64)
		if !ok || name == label {
			if !array.Equal(ga, wa) {
				t.Fatalf("column %s changed", name)
			}
			continue
		}
		g, ok := ga.(*array.Float32)
		if !ok {
			t.Fatalf("column %s is %s, want float32", name, ga.DataType())
		}
		for i := range w.Len() {
			if w.IsNull(i) != g.IsNull(i) || (w.IsValid(i) && g.Value(i) != float32(w.Value(i))) {
				t.Fatalf("column %s row %d: %v, want %v", name, i, g.ValueStr(i), w.ValueStr(i))
			}
		}
	}
}

// With Float32Features a split's float64 columns other than the label
// are read as float32, Parquet's flat columns narrowed as they are
// decoded (flatColumns, with nulls, dictionary-encoded and plain pages,
// one and two decode workers) and the others (pqarrow's, CSV's and Arrow
// files') as each batch is read; the label and the other types are left
// as they are.
func TestFloat32Features(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const rows = 5000
	for _, dict := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("flat-%v.parquet", dict))
		writeFlatParquet(t, path, rows, 1300, compress.Codecs.Snappy, false, true, dict)
		want := readPlain(t, path, 0, rows)
		defer want.Release()
		for _, label := range []string{"", "f64"} {
			for _, pqarrowOnly := range []bool{false, true} {
				for _, workers := range []int{1, 2} {
					t.Run(fmt.Sprintf("parquet/dict=%v/label=%q/pqarrowOnly=%v/workers=%d", dict, label, pqarrowOnly, workers), func(t *testing.T) {
						opts := ReadOptions{BatchRows: 700, Allocator: memory.DefaultAllocator, DecodeWorkers: workers,
							LabelColumn: label, Float32Features: true, pqarrowOnly: pqarrowOnly}
						split := Split{URI: path, Format: FormatParquet, Rows: rows}
						f, err := fsys.Local().Open(ctx, path)
						if err != nil {
							t.Fatal(err)
						}
						op, err := openParquet(ctx, f, split, opts, false)
						if err != nil {
							f.Close()
							t.Fatal(err)
						}
						// The source's own batches: flat columns come narrowed.
						ps := op.src.(*parquetSource)
						f64 := ps.schema.Field(ps.schema.FieldIndices("f64")[0]).Type.ID()
						if decodedNarrow := !pqarrowOnly && label == ""; decodedNarrow != (f64 == arrow.FLOAT32) {
							t.Errorf("the source decodes f64 as %v", ps.schema.Field(ps.schema.FieldIndices("f64")[0]).Type)
						}
						r := newSplitReader(split, op, opts)
						defer r.Close()
						var got []arrow.RecordBatch
						eachBatch(t, r.Next, func(rec arrow.RecordBatch, off int64) {
							rec.Retain()
							got = append(got, rec)
						})
						all := got[0]
						for _, rec := range got[1:] {
							joined := concatRecords(t, all, rec)
							all.Release()
							rec.Release()
							all = joined
						}
						defer all.Release()
						checkNarrowed(t, all, want, label)
					})
				}
			}
		}
	}

	// Large uncompressed pages, which flatColumns may read from the file
	// straight into the batches (not when it narrows them).
	bigPages := filepath.Join(dir, "big-pages.parquet")
	writeFlatParquetPages(t, bigPages, 200_000, 90_000, 256<<10, compress.Codecs.Uncompressed, false, false, false)
	t.Run("parquet/uncompressed-pages", func(t *testing.T) {
		want := readPlain(t, bigPages, 0, 200_000)
		defer want.Release()
		plan, err := Plan(ctx, newResolver(), PlanRequest{Inputs: []string{bigPages}, Ranks: 1})
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPipeline(newResolver(), PipelineConfig{Splits: plan.Ranks[0], Schema: plan.Schema, BatchRows: 7000,
			Prefetch: 2, DecodeWorkers: 2, EvenBatches: EvenOff, Float32Features: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		r, err := p.Epoch(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		n := eachBatch(t, r.Next, func(rec arrow.RecordBatch, off int64) {
			exp := want.NewSlice(off, off+rec.NumRows())
			defer exp.Release()
			checkNarrowed(t, rec, exp, "")
		})
		if n != 200_000 {
			t.Errorf("fed %d rows, want 200000", n)
		}
	})

	// Other inputs, through a pipeline: its schema says float32 too.
	arrowPath := writeArrow(t, filepath.Join(dir, "rows.arrow"), 0, 3000, 1000)
	csvPath := writeText(t, filepath.Join(dir, "rows.csv"), csvTextOpts(0, 3000, true, false))
	want := testRecord(testSchema, 0, 3000)
	defer want.Release()
	for _, input := range []string{arrowPath, csvPath} {
		t.Run(filepath.Ext(input), func(t *testing.T) {
			p := plannedPipeline(t, newResolver(), input, PipelineConfig{BatchRows: 1000, Prefetch: 2, EvenBatches: EvenOff,
				Float32Features: true})
			defer p.Close()
			if got := p.Schema().Field(1); got.Type.ID() != arrow.FLOAT32 {
				t.Fatalf("the pipeline's schema has x as %s", got.Type)
			}
			r, err := p.Epoch(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			eachBatch(t, r.Next, func(rec arrow.RecordBatch, off int64) {
				if !rec.Schema().Equal(p.Schema()) {
					t.Fatalf("a batch's schema %v, the pipeline's %v", rec.Schema(), p.Schema())
				}
				exp := want.NewSlice(off, off+rec.NumRows())
				defer exp.Release()
				checkNarrowed(t, rec, exp, "label", "id", "x", "label") // CSV's names are quoted
			})
		})
	}
}
