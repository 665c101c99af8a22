package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPathsOnWorkers: one path rule on a cluster, as spark-submit has it.
// A relative program (bin/check.sh) and an interpreter's script reach the
// workers, fetched from the driver with their mode; --files land in the
// process's working directory; a relative --checkpoint-dir means the one
// under the submit directory.
func TestPathsOnWorkers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 1000)
	submitDir := t.TempDir()
	write := func(name, text string, mode os.FileMode) {
		p := filepath.Join(submitDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("bin/check.sh", "#!/bin/sh\necho \"rank $SPINDLE_RANK conf=$(cat settings.conf) ckpt=$SPINDLE_CHECKPOINT_DIR\"\n", 0o755)
	write("settings.conf", "lr=0.5", 0o644)
	write("train.sh", "echo \"rank $SPINDLE_RANK ran the shipped script in $(basename $PWD) files=$SPINDLE_FILES_DIR\"\n", 0o644)

	args := func(name string, cmd ...string) []string {
		return append([]string{"--name", name, "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "512m",
			"--input", data + "/*.parquet"}, cmd...)
	}
	j := c.submit(submitDir, args("program", "--files", "settings.conf", "--checkpoint-dir", "ckpt", "--", "bin/check.sh")...)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("relative program: exit %d\n%s\n%s", code, j.stdout.String(), j.stderr.String())
	}
	for _, want := range []string{"[rank 0] rank 0 conf=lr=0.5 ckpt=" + filepath.Join(submitDir, "ckpt"), "[rank 1] rank 1 conf=lr=0.5"} {
		if !strings.Contains(j.stdout.String(), want) {
			t.Errorf("want %q:\n%s\n%s", want, j.stdout.String(), j.stderr.String())
		}
	}
	if !strings.Contains(j.stderr.String(), "shipping "+filepath.Join(submitDir, "bin/check.sh")) {
		t.Errorf("submit did not say it ships the program:\n%s", j.stderr.String())
	}

	j = c.submit(submitDir, args("script", "--", "/bin/sh", "train.sh")...)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("interpreter and script: exit %d\n%s\n%s", code, j.stdout.String(), j.stderr.String())
	}
	if !strings.Contains(j.stdout.String(), "[rank 1] rank 1 ran the shipped script") {
		t.Errorf("the script did not run on the workers:\n%s\n%s", j.stdout.String(), j.stderr.String())
	}
	// The executors' files and sockets live under the worker's --work-dir,
	// which the worker cleans, not in the system's temporary directory.
	if !strings.Contains(j.stdout.String(), "files="+c.dir) || !strings.Contains(j.stdout.String(), "/.spindle/files") {
		t.Errorf("executor files outside the worker's work directory %s:\n%s", c.dir, j.stdout.String())
	}
}
