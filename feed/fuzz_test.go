package feed

import (
	"bytes"
	"context"
	"errors"
	"github.com/spindle-ml/spindle/testbed/flighttest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/fsys"
)

// memFile is a file whose bytes are in memory, for the fuzz targets.
type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

// fuzzBatches are what the fuzz targets' seed files hold: a string
// column among numbers, in two batches (or row groups).
func fuzzBatches(t testing.TB) []arrow.RecordBatch {
	return []arrow.RecordBatch{flighttest.NameBatch(4, []int32{0, 1, 2, 3, 4}, "abcd"), flighttest.NameBatch(3, []int32{0, 2, 2, 5}, "hello")}
}

// arrowFileBytes is a small valid Arrow IPC file.
func arrowFileBytes(t testing.TB) []byte {
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(flighttest.NameSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range fuzzBatches(t) {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// parquetFileBytes is a small valid Parquet file, a row group a batch.
func parquetFileBytes(t testing.TB) []byte {
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(flighttest.NameSchema, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range fuzzBatches(t) {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkInspected is what a planner owes any bytes: a schema and units,
// or an input error naming the file. Never a panic.
func checkInspected(t *testing.T, schema *arrow.Schema, units []unit, err error) {
	if err != nil {
		if !errors.Is(err, ErrInput) || !bytes.Contains([]byte(err.Error()), []byte("fuzz://file")) {
			t.Fatalf("error %v: want an input error naming the file", err)
		}
		return
	}
	if schema == nil {
		t.Fatal("no schema and no error")
	}
	for _, u := range units {
		if u.rows < 0 {
			t.Fatalf("unit %d has %d rows", u.index, u.rows)
		}
	}
}

// FuzzInspectIPC plans Arrow IPC files of any bytes, as inspectIPC does
// with a file from an --input: damaged footers, schemas and block tables
// (testdata/fuzz/FuzzInspectIPC holds the crashers found) are an error
// naming the file.
func FuzzInspectIPC(f *testing.F) {
	good := arrowFileBytes(f)
	f.Add(good)
	f.Add(good[:len(good)-10])
	f.Fuzz(func(t *testing.T, b []byte) {
		schema, units, err := inspectIPC(memFile{bytes.NewReader(b)}, "fuzz://file")
		checkInspected(t, schema, units, err)
	})
}

// FuzzInspectParquet plans Parquet files of any bytes, as inspectParquet
// does (Spindle's own footer index first, then arrow-go's thrift
// decoder): a damaged footer is an error naming the file
// (testdata/fuzz/FuzzInspectParquet holds the crashers found).
func FuzzInspectParquet(f *testing.F) {
	good := parquetFileBytes(f)
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		schema, units, err := inspectParquet(memFile{bytes.NewReader(b)}, "fuzz://file")
		checkInspected(t, schema, units, err)
	})
}

// TestPlanGarbledFooter: planning an Arrow IPC or Parquet file whose
// footer is garbled (the fuzz crashers) fails with one input error naming
// the file, not a panic.
func TestPlanGarbledFooter(t *testing.T) {
	for _, tc := range []struct{ target, name string }{
		{"FuzzInspectIPC", "part-0.arrow"},
		{"FuzzInspectParquet", "part-0.parquet"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			corpus, err := os.ReadFile(filepath.Join("testdata", "fuzz", tc.target, "garbled-footer-1"))
			if err != nil {
				t.Fatal(err)
			}
			lit := strings.TrimSuffix(strings.SplitN(string(corpus), "\n", 2)[1], "\n")
			s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lit, "[]byte("), ")"))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
			res := fsys.NewResolver(fsys.Options{})
			defer res.Close()
			_, err = Plan(context.Background(), res, PlanRequest{Inputs: []string{path}, Ranks: 1})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.name) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one input error naming %s", err, tc.name)
			}
		})
	}
}
