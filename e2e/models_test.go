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

// TestSparseLRModelScoresAsTheTrainer: the tables a parameter-server job
// checkpointed export as a sparse logistic regression (LabelEncoder,
// Gather, ReduceSum, Sigmoid) that ONNX Runtime scores as the trainer
// scored its held-out rows, within 1e-5, and that the store lists.
func TestSparseLRModelScoresAsTheTrainer(t *testing.T) {
	t.Parallel()
	ortest.Python(t)
	dir := t.TempDir()
	ckpt, models, scores := filepath.Join(dir, "ckpt"), filepath.Join(dir, "models"), filepath.Join(dir, "scores.json")
	r := spindle(t, dir, submitArgs("--master", "local[2]", "--num-ps", "2", "--checkpoint-dir", ckpt,
		"--", sparseLRBin, "--rows", "20000", "--checkpoint-every", "10", "--eval-rows", "2000", "--scores-out", scores)...)
	if r.code != 0 {
		t.Fatalf("sparse-lr job failed:\n%s", r)
	}
	e := spindle(t, dir, "model", "export", "--format", "onnx", ckpt, "--name", "slr", "--store", models, "--sigmoid")
	if e.code != 0 || !strings.Contains(e.stdout, "published sparse table weights") {
		t.Fatalf("export failed:\n%s", e)
	}
	var sample struct {
		IDs    [][]uint64 `json:"ids"`
		Scores []float64  `json:"scores"`
	}
	b, err := os.ReadFile(scores)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sample); err != nil {
		t.Fatal(err)
	}
	width := len(sample.IDs[0])
	var ids []float64
	for _, row := range sample.IDs {
		for _, k := range row {
			ids = append(ids, float64(k))
		}
	}
	got := ortest.Run(t, filepath.Join(models, "slr", "1", "model.onnx"),
		map[string]ortest.Input{convert.TableInput: {DType: "int64", Shape: []int{len(sample.IDs), width}, Data: ids}})[convert.TableOutputLogReg]
	if len(got) != len(sample.Scores) {
		t.Fatalf("%d scores for %d rows", len(got), len(sample.Scores))
	}
	for i, want := range sample.Scores {
		if math.Abs(got[i]-want) > 1e-5 {
			t.Fatalf("held-out row %d: onnxruntime %v, trainer %v", i, got[i], want)
		}
	}
	l := spindle(t, dir, "model", "list", "--store", models)
	if l.code != 0 || !strings.Contains(l.stdout, "slr") {
		t.Fatalf("list:\n%s", l)
	}

	// A job started from the stored model, training nothing, holds the
	// exported weights bit for bit: its scores are the first job's.
	scores2 := filepath.Join(dir, "scores2.json")
	r = spindle(t, dir, submitArgs("--master", "local[2]", "--num-ps", "2", "--checkpoint-dir", filepath.Join(dir, "ckpt2"),
		"--conf", "spindle.models.dir="+models,
		"--", sparseLRBin, "--rows", "0", "--eval-rows", "2000", "--scores-out", scores2, "--init-model", "slr/1")...)
	if r.code != 0 || !strings.Contains(r.stdout, "starts from model slr/1") {
		t.Fatalf("job from the stored model failed:\n%s", r)
	}
	b2, err := os.ReadFile(scores2)
	if err != nil {
		t.Fatal(err)
	}
	if string(b2) != string(b) {
		t.Errorf("the job started from the exported model scores the held-out rows differently:\n%s\n%s", b, b2)
	}

	// A model without the job's table is refused naming both.
	lrDir := filepath.Join(dir, "lr")
	writeFile(t, filepath.Join(lrDir, convert.LogRegFile), `{"weights":[1,2],"bias":0}`)
	if e := spindle(t, dir, "model", "export", lrDir, "--name", "lr", "--store", models); e.code != 0 {
		t.Fatalf("export:\n%s", e)
	}
	r = spindle(t, dir, submitArgs("--master", "local[2]", "--num-ps", "1", "--checkpoint-dir", filepath.Join(dir, "ckpt3"),
		"--conf", "spindle.models.dir="+models, "--", sparseLRBin, "--rows", "0", "--init-model", "lr/1")...)
	if r.code == 0 || !strings.Contains(r.stderr, `no table "weights"`) || !strings.Contains(r.stderr, filepath.Join(models, "lr", "1")) {
		t.Fatalf("a model without table weights was not refused naming both:\n%s", r)
	}
}
