package e2e

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/ortest"
	"github.com/spindle-ml/spindle/model/convert"
)

// TestLogRegModelLeavesAndComesBack is issue 37's round trip with the
// real trainer: a logreg job's checkpoint exports into the model store
// with spindle model export, ONNX Runtime scores held-out rows as the
// trainer would (within 1e-5), a second job starts from the stored model
// with --init-model and holds bit-identical weights, and a feed the model
// does not fit is refused naming both.
func TestLogRegModelLeavesAndComesBack(t *testing.T) {
	t.Parallel()
	ortest.Python(t)
	data := generate(t, "parquet", 4000, 2)
	dir := t.TempDir()
	ckpt, models := filepath.Join(dir, "ckpt"), filepath.Join(dir, "models")
	r := spindle(t, data, submitArgs("--master", "local[2]", "--input", "*.parquet", "--label-column", "label",
		"--feed", "tensor", "--epochs", "2", "--checkpoint-dir", ckpt, "--conf", "spindle.models.dir="+models, "--", logregBin)...)
	if r.code != 0 {
		t.Fatalf("training job failed:\n%s", r)
	}
	final := regexp.MustCompile(`final rank=0 epochs=\d+ loss=\S+ accuracy=\S+ weights=(\S+)`).FindStringSubmatch(r.stdout)
	if final == nil {
		t.Fatalf("no final line:\n%s", r)
	}

	e := spindle(t, data, "model", "export", "--format", "onnx", ckpt, "--name", "lr", "--store", models,
		"--columns", "f0,f1,f2,f3", "--label-column", "label")
	if e.code != 0 || !strings.Contains(e.stdout, "published logistic regression of 4 features") {
		t.Fatalf("export failed:\n%s", e)
	}
	var lr convert.LogReg
	b, err := os.ReadFile(filepath.Join(ckpt, convert.LogRegFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &lr); err != nil {
		t.Fatal(err)
	}
	// Held-out rows, scored by ONNX Runtime and by the trainer's formula
	// (examples/logreg: z in float64 over the float32 features).
	rng := rand.New(rand.NewPCG(9, 9))
	const rows = 200
	x := make([]float64, rows*4)
	for i := range x {
		x[i] = float64(float32(rng.NormFloat64()))
	}
	got := ortest.Run(t, filepath.Join(models, "lr", "1", "model.onnx"),
		map[string]ortest.Input{convert.LogRegInput: {DType: "float32", Shape: []int{rows, 4}, Data: x}})[convert.LogRegOutput]
	for i := range rows {
		z := lr.Bias
		for j := range 4 {
			z += lr.Weights[j] * x[i*4+j]
		}
		if p := 1 / (1 + math.Exp(-z)); math.Abs(got[i]-p) > 1e-5 {
			t.Fatalf("row %d: onnxruntime %v, trainer %v", i, got[i], p)
		}
	}

	r = spindle(t, data, submitArgs("--master", "local[2]", "--input", "*.parquet", "--label-column", "label",
		"--feed", "tensor", "--epochs", "1", "--conf", "spindle.models.dir="+models, "--", logregBin, "--init-model", "lr/1")...)
	if r.code != 0 {
		t.Fatalf("job from the stored model failed:\n%s", r)
	}
	for _, rank := range []string{"0", "1"} {
		if want := "initialized rank=" + rank + " from model lr/1 weights=" + final[1]; !strings.Contains(r.stdout, want) {
			t.Errorf("no line %q: the imported weights differ from the exported ones:\n%s", want, r)
		}
	}

	narrow := generateWith(t, "parquet", 500, 1, 3)
	r = spindle(t, narrow, submitArgs("--master", "local[1]", "--input", "*.parquet", "--label-column", "label",
		"--feed", "tensor", "--epochs", "1", "--", logregBin, "--init-model", filepath.Join(models, "lr", "1"))...)
	if r.code == 0 || !strings.Contains(r.stderr, "has 4 features but the feed gives 3") || !strings.Contains(r.stderr, filepath.Join(models, "lr", "1")) {
		t.Fatalf("a model of 4 features on a feed of 3 was not refused naming both:\n%s", r)
	}
	r = spindle(t, narrow, submitArgs("--master", "local[1]", "--input", "*.parquet", "--label-column", "label",
		"--feed", "tensor", "--epochs", "1", "--conf", "spindle.models.dir="+models, "--", logregBin, "--init-model", "nope")...)
	if r.code == 0 || !strings.Contains(r.stderr, "model nope") {
		t.Fatalf("a missing model was not refused naming it:\n%s", r)
	}
}
