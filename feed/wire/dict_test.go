package wire

import (
	"context"
	"encoding/json"
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
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/fsys"

	"github.com/spindle-ml/spindle/feed/plan"
)

// dictRows and dictGroupRows shape the file of the dictionary tests: row
// groups whose dictionaries differ, cut across by batches and shuffle
// windows.
const dictRows, dictGroupRows = 3000, 700

// dictValue is row id's value of the string column: each row group has
// values of its own, and every 11th row is null ("" here).
func dictValue(id int64) string {
	if id%11 == 5 {
		return ""
	}
	return fmt.Sprintf("g%d-v%d-ü", id/dictGroupRows, id%7)
}

// writeDictParquet writes dictRows rows (id, cat, label) with cat
// dictionary-encoded, as most Parquet writers store low-cardinality
// strings.
func writeDictParquet(t *testing.T, path string) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "cat", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(dictGroupRows),
		parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(true))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for id := int64(0); id < dictRows; id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		if v := dictValue(id); v == "" {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(v)
		}
		b.Field(2).(*array.Int64Builder).Append(id % 2)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.WriteBuffered(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// dictPipeline plans path for one rank and returns its shuffling pipeline.
func dictPipeline(t *testing.T, path string) *feed.Pipeline {
	t.Helper()
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	jp, err := plan.Plan(ctx, res, feed.PlanRequest{Inputs: []string{path}, Ranks: 1, LabelColumn: "label"})
	if err != nil {
		t.Fatal(err)
	}
	if dt := jp.Schema.Field(1).Type; dt.ID() != arrow.DICTIONARY {
		t.Fatalf("the plan has the dictionary-encoded column as %s, want a dictionary", dt)
	}
	p, err := feed.NewPipeline(res, feed.PipelineConfig{Splits: jp.Ranks[0], Schema: jp.Schema, LabelColumn: "label",
		BatchRows: 256, Shuffle: true, Seed: 7, ShuffleBufferRows: 1000, Prefetch: 2, EvenBatches: feed.EvenOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// The arrow feed passes Parquet's dictionary-encoded strings as Arrow
// dictionary arrays, whose dictionaries change from row group to row
// group: a Go consumer gets dictionary arrays, Python (built-in reader and
// pyarrow) the strings, every row once with its own value.
func TestArrowFeedKeepsDictionaries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dict.parquet")
	writeDictParquet(t, path)
	tests := []struct {
		name string
		read func(t *testing.T, p *feed.Pipeline) map[int64]string // id -> value, "" for null
	}{
		{"go", readDictGo},
		{"python", func(t *testing.T, p *feed.Pipeline) map[int64]string { return readDictPython(t, p, false) }},
		{"pyarrow", func(t *testing.T, p *feed.Pipeline) map[int64]string { return readDictPython(t, p, true) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.read(t, dictPipeline(t, path))
			if len(got) != dictRows {
				t.Fatalf("read %d distinct rows, want %d", len(got), dictRows)
			}
			for id := int64(0); id < dictRows; id++ {
				if v, ok := got[id]; !ok || v != dictValue(id) {
					t.Fatalf("row %d: got %q (present %t), want %q", id, v, ok, dictValue(id))
				}
			}
		})
	}
}

// readDictGo reads one epoch with the Go client and checks that the
// column arrives as a dictionary array.
func readDictGo(t *testing.T, p *feed.Pipeline) map[int64]string {
	ctx := testCtx(t)
	srv, stop := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: p, LabelColumn: "label"})
	a, err := DialArrow(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got := map[int64]string{}
	for {
		rec, err := a.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids := rec.Column(0).(*array.Int64)
		cat, ok := rec.Column(1).(*array.Dictionary)
		if !ok {
			rec.Release()
			t.Fatalf("column cat arrives as %T, want a dictionary array", rec.Column(1))
		}
		dict := cat.Dictionary().(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			if _, dup := got[ids.Value(i)]; dup {
				t.Errorf("row %d fed twice", ids.Value(i))
			}
			got[ids.Value(i)] = ""
			if cat.IsValid(i) {
				got[ids.Value(i)] = dict.Value(cat.GetValueIndex(i))
			}
		}
		rec.Release()
	}
	if err := stop(); err != nil {
		t.Fatalf("server: %v", err)
	}
	return got
}

// readDictPython reads one epoch with the Python package: its own reader
// through shared memory, pyarrow over the socket.
func readDictPython(t *testing.T, p *feed.Pipeline, pyarrow bool) map[int64]string {
	pkgDir := pyPrerequisites(t)
	py, env := pyInterpreter, "SPINDLE_PYARROW=0"
	if pyarrow {
		py, env = pyarrowInterpreter(t), "SPINDLE_PYARROW=1"
	}
	res, err := pyRun(t, py, pkgDir, ModeArrow, p, 1, "batches", !pyarrow, env)
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	if res.Error != nil {
		t.Fatalf("python: %s", *res.Error)
	}
	if len(res.Epochs) != 1 {
		t.Fatalf("python saw %d epochs, want 1", len(res.Epochs))
	}
	if dt := res.Epochs[0].DTypes["cat"]; dt != "object" {
		t.Errorf("python has the strings as dtype %s, want object", dt)
	}
	got := map[int64]string{}
	for b, batch := range res.Epochs[0].Batches {
		var ids []int64
		var cats []*string
		if err := json.Unmarshal(batch["id"], &ids); err != nil {
			t.Fatalf("batch %d ids: %v", b, err)
		}
		if err := json.Unmarshal(batch["cat"], &cats); err != nil || len(cats) != len(ids) {
			t.Fatalf("batch %d: %d values for %d ids (%v)", b, len(cats), len(ids), err)
		}
		for i, id := range ids {
			if _, dup := got[id]; dup {
				t.Errorf("row %d fed twice", id)
			}
			got[id] = ""
			if cats[i] != nil {
				got[id] = *cats[i]
			}
		}
	}
	return got
}
