package export

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/internal/pstest"
	"github.com/spindle-ml/spindle/ps/pspb"
)

const token = "export-test-secret"

// A checkpoint of three servers with one backup each (so every row sits in
// two parts) exports as every key once, with the weights a pull returned
// at the checkpoint's clock, for a sparse and a dense table.
func TestCheckpointExport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	c := pstest.Start(t, pstest.Options{Servers: 3, Workers: 1, Token: token, Replicas: 1})
	cl, err := client.New(client.Config{Servers: c.Addrs, Token: token, Logger: pstest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	specs := []*ps.TableSpec{
		{Name: "emb", Dim: 4, Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad, LearningRate: 0.1},
			Initializer: &pspb.Initializer{Kind: ps.Normal, Scale: 1, Seed: 3}},
		{Name: "bias", Dim: 1, Rows: 1000, Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 1}},
	}
	keys := map[string][]uint64{"emb": make([]uint64, 2000), "bias": make([]uint64, 1000)}
	for i := range keys["emb"] {
		keys["emb"][i] = uint64(i)*104729 + 11
	}
	for i := range keys["bias"] {
		keys["bias"][i] = uint64(i)
	}
	want := map[string]map[uint64][]float32{}
	base := filepath.Join(t.TempDir(), "ckpt")
	for _, s := range specs {
		if err := cl.Declare(ctx, s); err != nil {
			t.Fatal(err)
		}
		ks, d := keys[s.Name], int(s.Dim)
		g := make([]float32, len(ks)*d)
		for i := range g {
			g[i] = float32(i%7) - 3
		}
		if err := cl.Push(ctx, s.Name, ks, g); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(g))
		if err := cl.Pull(ctx, s.Name, ks, got); err != nil {
			t.Fatal(err)
		}
		want[s.Name] = map[uint64][]float32{}
		for i, k := range ks {
			want[s.Name][k] = got[i*d : (i+1)*d]
		}
	}
	dir, err := cl.ClockAndCheckpoint(ctx, base, res)
	if err != nil {
		t.Fatal(err)
	}

	for _, from := range []string{base, dir} { // the job's base, or one checkpoint
		out := filepath.Join(t.TempDir(), "model")
		clock, files, err := Checkpoint(ctx, res, from, "", out)
		if err != nil {
			t.Fatalf("export %s: %v", from, err)
		}
		if clock != 1 || len(files) != 2 {
			t.Fatalf("export %s: clock %d, files %+v", from, clock, files)
		}
		for _, f := range files {
			if f.Rows != int64(len(keys[f.Table])) {
				t.Errorf("table %s: %d rows exported, want %d (each key once)", f.Table, f.Rows, len(keys[f.Table]))
			}
			checkFile(t, f.URI, f.Dim, want[f.Table])
		}
	}

	// One table by name.
	out := filepath.Join(t.TempDir(), "one")
	if _, files, err := Checkpoint(ctx, res, base, "bias", out); err != nil || len(files) != 1 || files[0].Table != "bias" {
		t.Fatalf("export of table bias: %+v, %v", files, err)
	}
	if _, err := os.Stat(filepath.Join(out, "emb.parquet")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("table emb was written when only bias was asked: %v", err)
	}
}

// What cannot be exported is named, and no file is left behind.
func TestCheckpointExportRefused(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	empty := t.TempDir()
	out := filepath.Join(t.TempDir(), "out")
	if _, _, err := Checkpoint(ctx, res, empty, "", out); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("export of a directory without checkpoints: %v", err)
	}
	// A checkpoint killed before its manifest is not one.
	if err := os.MkdirAll(filepath.Join(empty, "clock-5"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Checkpoint(ctx, res, empty, "", out); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("export of an incomplete checkpoint: %v", err)
	}

	c := pstest.Start(t, pstest.Options{Servers: 2, Workers: 1, Token: token})
	cl, err := client.New(client.Config{Servers: c.Addrs, Token: token, Logger: pstest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "w", Dim: 2}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Push(ctx, "w", []uint64{1, 2, 3}, make([]float32, 6)); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "ckpt")
	if _, err := cl.ClockAndCheckpoint(ctx, base, res); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Checkpoint(ctx, res, base, "nope", out); !errors.Is(err, ErrNoTable) {
		t.Fatalf("export of a table the checkpoint lacks: %v", err)
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Checkpoint(ctx, res, base, "", filepath.Join(blocker, "out")); err == nil {
		t.Fatal("export under a file succeeded")
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Fatalf("refused exports left %d files in %s", len(entries), out)
	}
}

// checkFile reads an exported table back and compares it with want.
func checkFile(t *testing.T, path string, dim int, want map[uint64][]float32) {
	t.Helper()
	f, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pqarrow.NewFileReader(f, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := r.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	seen := map[uint64]bool{}
	for ci, chunk := range tbl.Column(0).Data().Chunks() {
		ks := chunk.(*array.Uint64)
		vs := tbl.Column(1).Data().Chunk(ci).(*array.FixedSizeList).ListValues().(*array.Float32)
		for i := range ks.Len() {
			k := ks.Value(i)
			w, ok := want[k]
			if !ok || seen[k] {
				t.Fatalf("%s: key %d unexpected or repeated", path, k)
			}
			seen[k] = true
			for j := range dim {
				if vs.Value(i*dim+j) != w[j] {
					t.Fatalf("%s: key %d value %d is %v, pulled %v", path, k, j, vs.Value(i*dim+j), w[j])
				}
			}
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%s: %d keys, want %d", path, len(seen), len(want))
	}
}
