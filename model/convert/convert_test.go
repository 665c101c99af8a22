package convert

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/ortest"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/model/onnx"
	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// writeModel encodes m into a fresh directory as a store version would
// hold it and returns model.onnx's path.
func writeModel(t *testing.T, m *pb.ModelProto, threshold int64) string {
	t.Helper()
	srcs, err := onnx.Encode(m, threshold)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, s := range srcs {
		r, err := s.Open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, s.Path))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadFrom(r); err != nil {
			t.Fatal(err)
		}
		f.Close()
		r.Close()
	}
	return filepath.Join(dir, "model.onnx")
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func TestLogRegScoresInONNXRuntimeAsTheTrainer(t *testing.T) {
	ortest.Python(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const features, rows = 200, 50
	lr := LogReg{Bias: rng.NormFloat64()}
	for range features {
		lr.Weights = append(lr.Weights, rng.NormFloat64())
	}
	x := make([]float32, rows*features)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, threshold := range []int64{onnx.DefaultExternalThreshold, 0} {
		m, err := LogRegToONNX(lr, "test")
		if err != nil {
			t.Fatal(err)
		}
		path := writeModel(t, m, threshold)
		_, statErr := os.Stat(filepath.Join(filepath.Dir(path), onnx.ExternalDataFile))
		if (threshold == 0) != (statErr == nil) {
			t.Fatalf("threshold %d: external data file: %v", threshold, statErr)
		}
		data := make([]float64, len(x))
		for i, v := range x {
			data[i] = float64(v)
		}
		got := ortest.Run(t, path, map[string]ortest.Input{LogRegInput: {DType: "float32", Shape: []int{rows, features}, Data: data}})[LogRegOutput]
		if len(got) != rows {
			t.Fatalf("%d scores for %d rows", len(got), rows)
		}
		for r := range rows {
			// The trainer's own score (examples/logreg, model.gradient).
			z := lr.Bias
			for j := range features {
				z += lr.Weights[j] * float64(x[r*features+j])
			}
			if d := math.Abs(got[r] - sigmoid(z)); d > 1e-5 {
				t.Fatalf("threshold %d: row %d: onnxruntime %v, trainer %v", threshold, r, got[r], sigmoid(z))
			}
		}
	}
}

func TestLogRegExportImportGivesIdenticalWeights(t *testing.T) {
	ctx := testCtx(t)
	lr := LogReg{Weights: []float64{0.1, -2.5e-300, math.Pi, 1e300}, Bias: -0.3}
	for i := range 200 {
		lr.Weights = append(lr.Weights, float64(i)/3)
	}
	for _, threshold := range []int64{onnx.DefaultExternalThreshold, 0} {
		m, err := LogRegToONNX(lr, "test")
		if err != nil {
			t.Fatal(err)
		}
		path := writeModel(t, m, threshold)
		back, err := onnx.Load(ctx, fsys.Local(), filepath.ToSlash(path))
		if err != nil {
			t.Fatal(err)
		}
		got, err := LogRegFromONNX(back, path, len(lr.Weights))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Weights, lr.Weights) || got.Bias != lr.Bias {
			t.Fatalf("threshold %d: imported %+v, exported %+v", threshold, got, lr)
		}
		_, err = LogRegFromONNX(back, "models/ctr/1", 5)
		if err == nil || !strings.Contains(err.Error(), "models/ctr/1") || !strings.Contains(err.Error(), "204 features but the feed gives 5") {
			t.Fatalf("width mismatch: %v", err)
		}
	}
}

// sparseTable is a table keyed as examples/sparse-lr keys its features.
func sparseTable(rng *rand.Rand, keys int) Table {
	t := Table{Name: "weights", Dim: 1}
	seen := map[uint64]bool{}
	for len(t.Keys) < keys {
		k := uint64(rng.IntN(26))<<20 | uint64(rng.IntN(1000))
		if !seen[k] {
			seen[k] = true
			t.Keys = append(t.Keys, k)
			t.Weights = append(t.Weights, float32(rng.NormFloat64()))
		}
	}
	t.Keys = append(t.Keys, 1<<40) // the intercept's key
	t.Weights = append(t.Weights, -1)
	return t
}

func TestSparseTableScoresInONNXRuntimeAsTheTrainer(t *testing.T) {
	ortest.Python(t)
	rng := rand.New(rand.NewPCG(3, 4))
	tab := sparseTable(rng, 5000)
	w := map[uint64]float32{}
	for i, k := range tab.Keys {
		w[k] = tab.Weights[i]
	}
	const rows, fields = 40, 27
	ids := make([]float64, 0, rows*fields)
	want := make([]float64, rows)
	for r := range rows {
		z := 0.0
		for f := range fields {
			k := tab.Keys[rng.IntN(len(tab.Keys))]
			if f == 0 {
				k = 1 << 40
			} else if f == fields-1 {
				k = 99<<20 | 7 // a key no worker touched: weight 0
			}
			ids = append(ids, float64(k))
			z += float64(w[k]) // as sparse-lr's evaluate sums pulled weights
		}
		want[r] = sigmoid(z)
	}
	for _, threshold := range []int64{onnx.DefaultExternalThreshold, 0} {
		m, err := TableToONNX(tab, TableOptions{Sigmoid: true}, "test")
		if err != nil {
			t.Fatal(err)
		}
		path := writeModel(t, m, threshold)
		got := ortest.Run(t, path, map[string]ortest.Input{TableInput: {DType: "int64", Shape: []int{rows, fields}, Data: ids}})[TableOutputLogReg]
		for r := range rows {
			if d := math.Abs(got[r] - want[r]); d > 1e-5 {
				t.Fatalf("threshold %d: row %d: onnxruntime %v, trainer %v", threshold, r, got[r], want[r])
			}
		}
	}
}

func TestDenseTableMeanInONNXRuntime(t *testing.T) {
	ortest.Python(t)
	tab := Table{Name: "emb", Dim: 3, Dense: true}
	for i := range 10 {
		tab.Keys = append(tab.Keys, uint64(i))
		tab.Weights = append(tab.Weights, float32(i), float32(-i), 0.5)
	}
	m, err := TableToONNX(tab, TableOptions{Combiner: CombineMean}, "test")
	if err != nil {
		t.Fatal(err)
	}
	got := ortest.Run(t, writeModel(t, m, 0), map[string]ortest.Input{TableInput: {DType: "int64", Shape: []int{2, 2}, Data: []float64{1, 3, 9, 9}}})[TableOutput]
	want := []float64{2, -2, 0.5, 9, -9, 0.5}
	if !slices.Equal(got, want) {
		t.Fatalf("onnxruntime %v, want %v", got, want)
	}
}

func TestTableExportImportGivesIdenticalWeights(t *testing.T) {
	ctx := testCtx(t)
	rng := rand.New(rand.NewPCG(5, 6))
	dense := Table{Name: "emb", Dim: 2, Dense: true, Keys: []uint64{0, 1, 2}, Weights: []float32{1, 2, 3, 4, 5, 6}}
	for _, tab := range []Table{sparseTable(rng, 300), dense} {
		m, err := TableToONNX(tab, TableOptions{}, "test")
		if err != nil {
			t.Fatal(err)
		}
		back, err := onnx.Load(ctx, fsys.Local(), filepath.ToSlash(writeModel(t, m, 0)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := TableFromONNX(back, "m", tab.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Keys, tab.Keys) || !slices.Equal(got.Weights, tab.Weights) || got.Dim != tab.Dim || got.Dense != tab.Dense {
			t.Fatalf("table %s came back as %+v", tab.Name, got)
		}
		if _, err := TableFromONNX(back, "models/ctr/2", "nope"); err == nil || !strings.Contains(err.Error(), `no table "nope"`) || !strings.Contains(err.Error(), tab.Name) {
			t.Fatalf("missing table: %v", err)
		}
	}
}
