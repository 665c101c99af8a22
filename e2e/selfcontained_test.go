package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// copyFile copies src to dst with mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// TestCopiedBinaryIsSelfContained copies the spindle binary alone into an
// empty directory outside the checkout, as a user installing it on a
// gateway or a worker would, and runs the PyTorch example (which imports
// spindle) and the Go example through it in local mode. The Python package
// comes from inside the binary, unpacked into the user's cache.
func TestCopiedBinaryIsSelfContained(t *testing.T) {
	t.Parallel()
	binDir := t.TempDir()
	bin := filepath.Join(binDir, "spindle")
	copyFile(t, spindleBin, bin, 0o755)
	work := t.TempDir() // the user's directory: their script and data, no checkout
	copyFile(t, filepath.Join(repoRoot, "examples", "pytorch", "train.py"), filepath.Join(work, "train.py"), 0o644)
	cache := t.TempDir()
	env := append(testEnv(), "XDG_CACHE_HOME="+cache)

	run := func(t *testing.T, args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = work, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		r := result{stdout: stdout.String(), stderr: stderr.String()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("python-path", func(t *testing.T) {
		r := run(t, "python-path")
		dir := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(dir, filepath.Join(cache, "spindle", "python")+string(filepath.Separator)) {
			t.Fatalf("spindle python-path: want a directory under %s:\n%s", cache, r)
		}
		if _, err := os.Stat(filepath.Join(dir, "spindle", "__init__.py")); err != nil {
			t.Fatalf("python-path printed %s, which holds no package: %v", dir, err)
		}
		if r := run(t, "python-path", "extra"); r.code != 2 {
			t.Fatalf("python-path with an argument: want exit 2:\n%s", r)
		}
	})
	t.Run("pytorch", func(t *testing.T) {
		needTorch(t)
		data := generateWith(t, "parquet", 4000, 2, 8)
		r := run(t, submitArgs("--master", "local[2]", "--input", filepath.Join(data, "*.parquet"),
			"--label-column", "label", "--feed", "tensor", "--batch-rows", "128", "--epochs", "2",
			"--", python, "train.py", "--threads", "1")...)
		if r.code != 0 {
			t.Fatalf("PyTorch job through the copied binary failed:\n%s", r)
		}
		if n := len(torchFinal.FindAllString(r.stdout, -1)); n != 2 {
			t.Fatalf("want a final line from each of 2 ranks, got %d:\n%s", n, r)
		}
	})
	t.Run("go", func(t *testing.T) {
		data := generate(t, "parquet", 4000, 2)
		r := run(t, submitArgs("--master", "local[2]", "--input", filepath.Join(data, "*.parquet"),
			"--label-column", "label", "--feed", "tensor", "--batch-rows", "128", "--epochs", "2",
			"--", logregBin, "--lr", "0.5")...)
		if r.code != 0 {
			t.Fatalf("Go job through the copied binary failed:\n%s", r)
		}
		finals := regexp.MustCompile(`\[rank \d\] final rank=\d epochs=2 `).FindAllString(r.stdout, -1)
		if len(finals) != 2 {
			t.Fatalf("want a final line from each of 2 ranks:\n%s", r)
		}
	})
}
