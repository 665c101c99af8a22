package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// testVenvPython is the Python of the venv holding tensorflow-cpu that
// scripts/install-deps.sh makes, or the test skips saying why.
func testVenvPython(t *testing.T) string {
	t.Helper()
	venv := os.Getenv("SPINDLE_TEST_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-test-venv")
	}
	py := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no test venv at %s (make deps makes it, with tensorflow-cpu): %v", venv, err)
	}
	return py
}

// repoRoot is the repository's top directory, where the README's commands
// are typed.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestReadmeTensorFlowOnYARN: the README's TensorFlow parameter-server
// line, typed in the repository with --master yarn in place of local[2]
// and the --python the README says a cluster needs, runs on real YARN in
// both deploy modes: the --ps-command script is shipped and found by ps 0
// as the training command's is by the chief and workers.
func TestReadmeTensorFlowOnYARN(t *testing.T) {
	py := testVenvPython(t)
	hc := hadooptest.Shared(t)
	root := repoRoot(t)
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			// As in the README, after "spindle submit --master yarn".
			args := []string{"--deploy-mode", mode, "--python", py,
				"--chief", "--num-ps", "1",
				"--ps-command", "python3 examples/tensorflow/train_ps.py", "--feed", "direct",
				"--", "python3", "examples/tensorflow/train_ps.py", "--steps", "40"}
			code, stdout, stderr := submitIn(t, root, hc.ConfDir, 8*time.Minute, args...)
			if code != 0 {
				t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
			}
			out := stdout + stderr
			if !regexp.MustCompile(`\[chief\] tfps steps=40 loss=\S+ accuracy=\S+ workers=2 ps=1`).MatchString(out) {
				t.Fatalf("no report from the chief:\n--- stdout\n%s\n--- stderr\n%s", stdout, stderr)
			}
			if !strings.Contains(out, "[ps 0] tfps ps 0 serving") {
				t.Errorf("ps 0 did not serve:\n%s", out)
			}
		})
	}
}
