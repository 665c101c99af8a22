package e2e

import (
	"context"
	"encoding/csv"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/examples/datagen/datagen"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/testutil"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// callUnauthenticated calls the driver's Register without credentials.
func callUnauthenticated(addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	_, err = driverpb.NewControlClient(conn).Register(ctx, &driverpb.RegisterRequest{ExecutorId: "exec-0", Host: "127.0.0.1"})
	return err
}

// datasetSum adds column f0 over every file in dir, read with arrow-go and
// encoding/csv directly rather than Spindle's readers.
func datasetSum(t *testing.T, dir string) float64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "part-*"))
	sum := 0.0
	for _, f := range files {
		switch filepath.Ext(f) {
		case ".parquet":
			rd, err := file.OpenParquetFile(f, false)
			if err != nil {
				t.Fatal(err)
			}
			fr, err := pqarrow.NewFileReader(rd, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			tbl, err := fr.ReadTable(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			idx := tbl.Schema().FieldIndices("f0")[0]
			for _, c := range tbl.Column(idx).Data().Chunks() {
				sum += sumColumn(c)
			}
			tbl.Release()
			rd.Close()
		case ".arrow":
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := ipc.NewFileReader(fh)
			if err != nil {
				t.Fatal(err)
			}
			idx := rd.Schema().FieldIndices("f0")[0]
			for i := 0; i < rd.NumRecords(); i++ {
				rec, err := rd.RecordBatch(i)
				if err != nil {
					t.Fatal(err)
				}
				sum += sumColumn(rec.Column(idx))
			}
			rd.Close()
			fh.Close()
		case ".csv":
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			r := csv.NewReader(fh)
			header, err := r.Read()
			if err != nil {
				t.Fatal(err)
			}
			idx := -1
			for i, h := range header {
				if h == "f0" {
					idx = i
				}
			}
			for {
				rec, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				v, _ := strconv.ParseFloat(rec[idx], 64)
				sum += float64(float32(v))
			}
			fh.Close()
		}
	}
	return sum
}

func sumColumn(a arrow.Array) float64 {
	s := 0.0
	switch c := a.(type) {
	case *array.Float32:
		for _, v := range c.Float32Values() {
			s += float64(v)
		}
	case *array.Float64:
		for _, v := range c.Float64Values() {
			s += v
		}
	}
	return s
}

// generate writes a labelled data set of rows rows with 4 features in
// files files of format under a fresh directory, and returns it.
func generate(t testing.TB, format string, rows, files int) string {
	return generateWith(t, format, rows, files, 4)
}

func generateWith(t testing.TB, format string, rows, files, features int) string {
	t.Helper()
	cfg := datagen.DefaultConfig()
	cfg.Out = t.TempDir()
	cfg.Rows = int64(rows)
	cfg.Files = files
	cfg.Features = features
	cfg.Format = feed.Format(format)
	cfg.RowGroupRows = max(rows/files/3, 1)
	cfg.Seed = 1
	if _, err := datagen.Generate(context.Background(), cfg); err != nil {
		t.Fatalf("generate %s data: %v", format, err)
	}
	return cfg.Out
}
