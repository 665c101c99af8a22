package proxy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/ps"
)

// pyInterpreter is the Python the training processes of the examples use.
const pyInterpreter = "/usr/bin/python3"

// TestPythonClient runs the Python package's tests of spindle.ps
// (python/tests/test_ps.py) against real proxies in front of real
// servers: worker 0's proxy for the calls, worker 1's for leaving.
func TestPythonClient(t *testing.T) {
	if err := exec.Command(pyInterpreter, "-c", "import numpy").Run(); err != nil {
		t.Skipf("%s cannot import numpy: %v", pyInterpreter, err)
	}
	tests := filepath.Join(testbin.Root(), "python", "tests")
	c := startCluster(t, 2, 2, ps.Async)
	w0, w1 := startProxy(t, c, 0, token), startProxy(t, c, 1, token)

	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, pyInterpreter, "-m", "unittest", "-v", "test_ps")
	cmd.Dir = tests
	cmd.Env = append(os.Environ(), "SPINDLE_TEST_PS_SOCKET="+w0.Path(), "SPINDLE_TEST_PS_SOCKET_LEAVE="+w1.Path(),
		"OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python tests failed: %v\n%s", err, out)
	}
	torch := exec.Command(pyInterpreter, "-c", "import torch").Run() == nil
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "skipped") && (torch || !strings.Contains(line, "needs torch")) {
			t.Errorf("a test was skipped: %s", line)
		}
	}
	t.Logf("%s", out)
}
