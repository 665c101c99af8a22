package push

import (
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/feed"
)

func TestMain(m *testing.M) {
	feed.RegisterPageCodecs() // as the spindle binary does
	goleak.VerifyTestMain(m)
}

// flightSchema is the schema of the pushed test rows.
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

// testRecord builds rows [start, start+n) of sc, whose columns are id
// (int64), x (float64: id/2) and label (int64: id%2).
func testRecord(sc *arrow.Schema, start, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.Float64Builder).Append(float64(i) / 2)
		b.Field(2).(*array.Int64Builder).Append(i % 2)
	}
	return b.NewRecordBatch()
}

// writeParquet writes rows [start, start+rows) of sc in row groups of
// rgRows.
func writeParquet(t testing.TB, path string, sc *arrow.Schema, start, rows, rgRows int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rgRows)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < rows; off += rgRows {
		rec := testRecord(sc, start+off, min(rgRows, rows-off))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
