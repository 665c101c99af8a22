package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testbin"
)

// TestCopiedBinaryIsSelfContained starts the masters and workers from a
// spindle binary copied alone into an empty directory outside the
// checkout, as an admin installing it on the cluster's hosts would, and
// runs the PyTorch example (which imports spindle) and the Go example on
// it. Executors give the training processes the Python package the binary
// carries.
func TestCopiedBinaryIsSelfContained(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "spindle")
	b, err := os.ReadFile(spindleBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// Every process of the cluster and the jobs runs the copy.
	orig := spindleBin
	spindleBin = bin
	t.Cleanup(func() { spindleBin = orig })
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)

	script := filepath.Join(t.TempDir(), "train.py")
	src, err := os.ReadFile(filepath.Join(testbin.Root(), "examples", "pytorch", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}

	c := startCluster(t, 2)
	data := generate(t, 4000)
	t.Run("pytorch", func(t *testing.T) {
		const python = "/usr/bin/python3"
		if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
			t.Skipf("%s cannot import torch and numpy (make deps installs python3-torch): %v", python, err)
		}
		j := c.submit(data, "--name", "torch-copied", "--num-executors", "2", "--executor-memory", "512m",
			"--input", data+"/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
			"--epochs", "2", "--", python, script, "--threads", "1")
		if code := j.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("PyTorch job failed (exit %d)\n--- stdout\n%s--- stderr\n%s", code, j.stdout.String(), j.stderr.String())
		}
		finals := regexp.MustCompile(`\[rank (\d)\] final rank=\d loss=\S+ accuracy=\S+ params_sha256=([0-9a-f]+)`).FindAllStringSubmatch(j.stdout.String(), -1)
		if len(finals) != 2 || finals[0][2] != finals[1][2] {
			t.Fatalf("want both ranks to end with the same parameters:\n%s\n--- stderr\n%s", j.stdout.String(), j.stderr.String())
		}
	})
	t.Run("go", func(t *testing.T) {
		j := c.submit(data, "--name", "go-copied", "--num-executors", "2", "--executor-memory", "512m",
			"--input", data+"/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
			"--epochs", "2", "--", logregBin, "--lr", "0.5")
		if code := j.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("Go job failed (exit %d)\n--- stdout\n%s--- stderr\n%s", code, j.stdout.String(), j.stderr.String())
		}
		if n := len(regexp.MustCompile(`\[rank \d\] final rank=\d epochs=2 `).FindAllString(j.stdout.String(), -1)); n != 2 {
			t.Fatalf("want a final line from each of 2 ranks:\n%s", j.stdout.String())
		}
	})
	if m, _ := filepath.Glob(filepath.Join(cache, "spindle", "python", "*", "spindle", "__init__.py")); len(m) != 1 {
		t.Fatalf("want the package unpacked once under %s, found %v", cache, m)
	}
}
