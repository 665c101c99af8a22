package client

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// An exported table reads back as every key with the values a pull
// returns.
func TestExportParquet(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 2, workers: 1})
	cl := c.client(t, 0)
	ctx := context.Background()
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 3, Initializer: &pspb.Initializer{Kind: ps.Normal, Scale: 1, Seed: 9}}); err != nil {
		t.Fatal(err)
	}
	keys := keysN(500)
	rows := make([]float32, 1500)
	if err := cl.Pull(ctx, "emb", keys, rows); err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]float32{}
	for i, k := range keys {
		want[k] = rows[i*3 : i*3+3]
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	path := filepath.Join(t.TempDir(), "emb.parquet")
	n, err := cl.ExportParquet(ctx, "emb", path, res)
	if err != nil || n != 500 {
		t.Fatalf("exported %d rows (%v), want 500", n, err)
	}
	f, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pqarrow.NewFileReader(f, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := r.ReadTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	got := 0
	for ci, chunk := range tbl.Column(0).Data().Chunks() {
		ks := chunk.(*array.Uint64)
		vs := tbl.Column(1).Data().Chunk(ci).(*array.FixedSizeList).ListValues().(*array.Float32)
		for i := range ks.Len() {
			w, ok := want[ks.Value(i)]
			if !ok {
				t.Fatalf("exported key %d was never pulled", ks.Value(i))
			}
			for j := range 3 {
				if vs.Value(i*3+j) != w[j] {
					t.Fatalf("key %d value %d: exported %v, pulled %v", ks.Value(i), j, vs.Value(i*3+j), w[j])
				}
			}
			got++
		}
	}
	if got != 500 {
		t.Fatalf("read back %d rows, want 500", got)
	}
	// A place that cannot be written is named, and nothing is left.
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o644)
	if _, err := cl.ExportParquet(ctx, "emb", filepath.Join(blocker, "emb.parquet"), res); err == nil || !strings.Contains(err.Error(), "export table emb") || !strings.Contains(err.Error(), blocker) {
		t.Fatalf("export under a file: %v", err)
	}
}
