// Package feedtest writes the files the feed's tests and its planner's
// tests read, and checks what they read back.
package feedtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// BatchReader is what ReadAll reads: a feed.Reader.
type BatchReader interface {
	Schema() *arrow.Schema
	Next(ctx context.Context) (arrow.RecordBatch, error)
	Close() error
}

// Schema is the schema of the test files: a unique row id, a feature,
// a string and a label.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// Record builds rows [start, start+n) of the test data.
func Record(sc *arrow.Schema, start, n int64) arrow.RecordBatch {
	return RecordWith(memory.DefaultAllocator, sc, start, n)
}

// RecordWith is Record allocating from mem.
func RecordWith(mem memory.Allocator, sc *arrow.Schema, start, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for i := start; i < start+n; i++ {
		for c, f := range sc.Fields() {
			switch f.Name {
			case "id":
				b.Field(c).(*array.Int64Builder).Append(i)
			case "x":
				switch fb := b.Field(c).(type) {
				case *array.Float64Builder:
					fb.Append(float64(i) / 2)
				case *array.Float32Builder:
					fb.Append(float32(i) / 2)
				}
			case "name":
				b.Field(c).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
			case "label":
				b.Field(c).(*array.Int64Builder).Append(i % 2)
			}
		}
	}
	return b.NewRecordBatch()
}

// WriteParquet writes rows [start, start+rows) in row groups of rgRows.
func WriteParquet(t testing.TB, path string, sc *arrow.Schema, start, rows, rgRows int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rgRows))
	w, err := pqarrow.NewFileWriter(sc, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	WriteBatches(t, w, sc, start, rows, rgRows)
	return path
}

// BatchWriter is what the Parquet and Arrow IPC file writers share.
type BatchWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// WriteBatches writes rows [start, start+rows) to w in batches of
// batchRows, then closes it.
func WriteBatches(t testing.TB, w BatchWriter, sc *arrow.Schema, start, rows, batchRows int64) {
	t.Helper()
	for off := int64(0); off < rows; off += batchRows {
		rec := Record(sc, start+off, min(batchRows, rows-off))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// WriteArrow writes rows [start, start+rows) as an Arrow IPC file in
// record batches of batchRows.
func WriteArrow(t testing.TB, path string, start, rows, batchRows int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(Schema))
	if err != nil {
		t.Fatal(err)
	}
	WriteBatches(t, w, Schema, start, rows, batchRows)
	return path
}

// CSVText returns rows [start, start+rows) as CSV, with names that need
// quoting now and then (a comma, a doubled quote, a line break).
func CSVText(start, rows int64, header bool) string { return CSVTextOpts(start, rows, header, true) }

// CSVTextOpts is CSVText, with quoted line breaks only when multiline.
func CSVTextOpts(start, rows int64, header, multiline bool) string {
	var sb strings.Builder
	if header {
		sb.WriteString("id,x,name,label\n")
	}
	for i := start; i < start+rows; i++ {
		name := fmt.Sprintf("row %d", i)
		switch i % 7 {
		case 3:
			name = fmt.Sprintf(`"row, %d"`, i)
		case 5:
			name = fmt.Sprintf(`"row ""%d"""`, i)
		case 6:
			if multiline {
				name = fmt.Sprintf("\"row\n%d\"", i)
			}
		}
		end := "\n"
		if i%4 == 1 {
			end = "\r\n"
		}
		fmt.Fprintf(&sb, "%d,%g,%s,%d%s", i, float64(i)/2, name, i%2, end)
	}
	return sb.String()
}

func WriteText(t testing.TB, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReadAll reads r to the end and returns the batches' rows of column col
// (an int64 column), checking every batch's schema.
func ReadAll(t testing.TB, r BatchReader, col string) []int64 {
	t.Helper()
	defer r.Close()
	var ids []int64
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Schema().Equal(r.Schema()) {
			t.Fatalf("batch schema %v, reader schema %v", rec.Schema(), r.Schema())
		}
		idx := rec.Schema().FieldIndices(col)
		if len(idx) == 0 {
			t.Fatalf("no column %q in %v", col, rec.Schema())
		}
		a := rec.Column(idx[0]).(*array.Int64)
		for i := 0; i < a.Len(); i++ {
			ids = append(ids, a.Value(i))
		}
		rec.Release()
	}
}

// CheckAllOnce checks that got holds 0..n-1 exactly once each.
func CheckAllOnce(t testing.TB, got []int64, n int64) {
	t.Helper()
	seen := make([]int, n)
	for _, id := range got {
		if id < 0 || id >= n {
			t.Fatalf("row id %d outside 0..%d", id, n-1)
		}
		seen[id]++
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("row %d read %d times (read %d rows, want %d)", id, c, len(got), n)
		}
	}
}

// FileURI is path as a file:// URI.
func FileURI(path string) string { return "file://" + filepath.ToSlash(path) }
