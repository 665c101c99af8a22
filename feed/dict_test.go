package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// dictSchema is the schema of the dictionary tests' files: an id, a
// string of five values, and a label.
var dictSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// dictRecord builds rows [start, start+n) of dictSchema.
func dictRecord(start, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, dictSchema)
	defer b.Release()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name %d", i%5))
		b.Field(2).(*array.Int64Builder).Append(i % 2)
	}
	return b.NewRecordBatch()
}

// writeParquetDict writes rows [start, start+rows) of dictSchema in row
// groups of rgRows, its string column dictionary-encoded or not.
func writeParquetDict(t *testing.T, path string, start, rows, rgRows int64, dict bool) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rgRows), parquet.WithDictionaryDefault(dict))
	w, err := pqarrow.NewFileWriter(dictSchema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	rec := dictRecord(start, rows)
	defer rec.Release()
	if err := w.WriteBuffered(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// A string column every file dictionary-encodes is planned and read as a
// dictionary array; when some file stores it plainly, it is planned and
// read as plain strings from every file, the dictionary-encoded ones too.
func TestPlanDictionaryStrings(t *testing.T) {
	tests := []struct {
		name     string
		dict     []bool // per file: dictionary-encoded
		wantDict bool
	}{
		{"every file dictionary-encodes", []bool{true, true}, true},
		{"one file stores it plainly", []bool{true, false}, false},
		{"no file dictionary-encodes", []bool{false, false}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			const rows = 300
			var inputs []string
			for i, dict := range tt.dict {
				inputs = append(inputs, writeParquetDict(t, filepath.Join(dir, string(rune('a'+i))+".parquet"),
					int64(i)*rows, rows, 70, dict))
			}
			ctx := context.Background()
			res := newResolver()
			plan, err := Plan(ctx, res, PlanRequest{Inputs: inputs, Ranks: 1, LabelColumn: "label"})
			if err != nil {
				t.Fatal(err)
			}
			name := plan.Schema.Field(plan.Schema.FieldIndices("name")[0])
			if got := name.Type.ID() == arrow.DICTIONARY; got != tt.wantDict {
				t.Fatalf("planned the string column as %s, want dictionary %t", name.Type, tt.wantDict)
			}
			p, err := NewPipeline(res, PipelineConfig{Splits: plan.Ranks[0], Schema: plan.Schema, LabelColumn: "label",
				BatchRows: 64, Prefetch: 2, EvenBatches: EvenOff})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			r, err := p.Epoch(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			seen := 0
			for {
				rec, err := r.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				want := dictRecord(rec.Column(0).(*array.Int64).Value(0), rec.NumRows())
				col := rec.Column(1)
				if (col.DataType().ID() == arrow.DICTIONARY) != tt.wantDict {
					t.Fatalf("a batch has the string column as %s", col.DataType())
				}
				if got := expand(t, col); !array.Equal(got, want.Column(1)) {
					t.Fatalf("rows from %d: strings %v, want %v", seen, got, want.Column(1))
				}
				seen += int(rec.NumRows())
				want.Release()
				rec.Release()
			}
			if seen != rows*len(tt.dict) {
				t.Fatalf("read %d rows, want %d", seen, rows*len(tt.dict))
			}
		})
	}
}
