package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/testbin"
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

// readmeCommand returns the words after "spindle submit --master
// 'local[2]'" of the README's command line under the comment line
// marker, as a shell splits them: the test runs what the README says,
// not a copy that could drift from it.
func readmeCommand(t *testing.T, root, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), marker+"\n")
	if !ok {
		t.Fatalf("README.md has no line %q", marker)
	}
	var line strings.Builder
	for _, l := range strings.Split(rest, "\n") {
		cont, more := strings.CutSuffix(strings.TrimSpace(l), "\\")
		line.WriteString(cont + " ")
		if !more {
			break
		}
	}
	words, err := driver.SplitCommand(line.String())
	if err != nil {
		t.Fatalf("README.md's line under %q: %v", marker, err)
	}
	prefix := []string{"spindle", "submit", "--master", "local[2]"}
	if len(words) < len(prefix) || !slices.Equal(words[:len(prefix)], prefix) {
		t.Fatalf("README.md's line under %q does not start %q: %q", marker, prefix, words)
	}
	return words[len(prefix):]
}

// TestReadmeTensorFlowOnYARN: the README's TensorFlow parameter-server
// line, read from the README and typed in the repository with --master
// yarn in place of local[2] and the --python the README says a cluster
// needs, runs on real YARN in both deploy modes: the --ps-command script
// is shipped and found by ps 0 as the training command's is by the chief
// and workers.
func TestReadmeTensorFlowOnYARN(t *testing.T) {
	t.Parallel()
	py := testVenvPython(t)
	hc := hadooptest.Shared(t)
	root := testbin.Root()
	line := readmeCommand(t, root, "# TensorFlow ParameterServerStrategy: the chief coordinates, workers and ps serve")
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			// As the README says for a cluster, after "spindle submit
			// --master yarn".
			args := append([]string{"--deploy-mode", mode, "--python", py}, line...)
			code, stdout, stderr := submitIn(t, root, hc.ConfDir, 8*time.Minute, args...)
			if code != 0 {
				t.Fatalf("spindle submit %q exited %d\n--- stdout\n%s\n--- stderr\n%s", args, code, stdout, stderr)
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
