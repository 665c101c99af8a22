// Package ortest scores ONNX models with the real ONNX Runtime (the
// onnxruntime wheel from PyPI in the test venv make deps builds), so that
// tests prove exported models load and predict outside Spindle.
package ortest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Python returns the test venv's Python when it imports onnxruntime, and
// skips the test when there is none.
func Python(t testing.TB) string {
	t.Helper()
	venv := os.Getenv("SPINDLE_TEST_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-test-venv")
	}
	py := filepath.Join(venv, "bin", "python")
	if out, err := exec.Command(py, "-c", "import onnxruntime").CombinedOutput(); err != nil {
		t.Skipf("skipping: the test venv's Python (%s) does not import onnxruntime (make deps installs it): %v %s", py, err, out)
	}
	return py
}

// Input is one input tensor: its numpy dtype, shape and values.
type Input struct {
	DType string    `json:"dtype"`
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// script loads the model with onnxruntime (checking it first with the
// onnx package's checker when installed), runs it on the inputs and
// prints every output, flattened, as JSON.
const script = `
import json, sys
import numpy as np
import onnxruntime as ort
path, inputs = sys.argv[1], json.load(sys.stdin)
try:
    import onnx
    onnx.checker.check_model(path)
except ImportError:
    pass
sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
feed = {k: np.array(v["data"], dtype=v["dtype"]).reshape(v["shape"]) for k, v in inputs.items()}
outs = sess.run(None, feed)
json.dump({o.name: np.asarray(v, dtype=np.float64).ravel().tolist() for o, v in zip(sess.get_outputs(), outs)}, sys.stdout)
`

// Run scores the model at path (a local file) on inputs and returns each
// output's values, flattened, by output name.
func Run(t testing.TB, path string, inputs map[string]Input) map[string][]float64 {
	t.Helper()
	py := Python(t)
	in, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", script, path)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("onnxruntime on %s: %v\n%s", path, err, stderr.String())
	}
	var res map[string][]float64
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("onnxruntime's output %q: %v", out, err)
	}
	return res
}
