package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// TestClusterModeRelativeProgram: in cluster mode a relative program
// (-- bin/logreg), which the gateway ships through the HDFS staging
// directory, keeps its execute bit and runs on every executor.
func TestClusterModeRelativeProgram(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	input := putData(t, hc, "/data/logreg-relative")
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile(logregBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "bin", "logreg"), prog, 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := submitIn(t, work, hc.ConfDir, 4*time.Minute,
		"--deploy-mode", "cluster", "--name", "yarn-relative-program", "--num-executors", "2", "--executor-memory", "256m",
		"--input", input, "--label-column", "label", "--feed", "tensor", "--epochs", "1", "--", "bin/logreg", "--lr", "0.5")
	if code != 0 {
		t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	if n := strings.Count(stdout+stderr, "final rank="); n != 2 {
		t.Fatalf("want both ranks to finish, saw %d:\n--- stdout\n%s\n--- stderr\n%s", n, stdout, stderr)
	}
}

// submitIn runs spindle submit in dir and returns its exit code, stdout
// and stderr.
func submitIn(t *testing.T, dir, confDir string, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, spindleBin, submitArgs(args...)...)
	cmd.Dir = dir
	cmd.Env = env(confDir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("run spindle submit: %v", err)
	}
	return 0, stdout.String(), stderr.String()
}
