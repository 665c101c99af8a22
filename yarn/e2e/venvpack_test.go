package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// packVenv is the venv, made from the system python3 with numpy and
// venv-pack in it, that scripts/install-deps.sh keeps for these tests.
func packVenv(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SPINDLE_PACK_VENV")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "spindle-pack-venv")
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "venv-pack")); err != nil {
		t.Skipf("no venv-pack venv at %s (make deps installs it): %v", dir, err)
	}
	return dir
}

// writeVenvPack packs the venv into path with venv-pack itself, as a user
// shipping a Python environment does.
func writeVenvPack(t *testing.T, path string) {
	t.Helper()
	venv := packVenv(t)
	out, err := exec.Command(filepath.Join(venv, "bin", "venv-pack"), "--quiet", "--prefix", venv, "--output", path).CombinedOutput()
	if err != nil {
		t.Fatalf("venv-pack %s: %v\n%s", venv, err, out)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("venv-pack wrote %s: %.1f MB", filepath.Base(path), float64(st.Size())/(1<<20))
}

// archiveCase is one archive shipped with --archives and the command that
// uses it, which prints "unpacked-RANK" when the archive is usable.
type archiveCase struct {
	name, file string
	write      func(t *testing.T, path string)
	command    []string
}

var (
	venvPackCase = archiveCase{
		name: "venv-pack", file: "env.tar.gz", write: writeVenvPack,
		command: []string{"env/bin/python", "-c",
			"import os, numpy; assert numpy.arange(10).sum() == 45; print('unpacked-' + os.environ['SPINDLE_RANK'], numpy.__version__)"},
	}
	manyFilesCase = archiveCase{
		name: "many-files", file: "env.tar.gz",
		write:   func(t *testing.T, path string) { writeManyFileArchive(t, path, 40000) },
		command: []string{"sh", "-c", "test -f env/lib/d39/f39999.py && echo unpacked-$SPINDLE_RANK"},
	}
)

// runArchive submits c's command with its archive (already in work) in the
// given deploy mode, with default settings, and returns "" when both ranks
// used the archive, else what went wrong.
func runArchive(t *testing.T, confDir, work, mode string, c archiveCase) string {
	t.Helper()
	args := append([]string{"--deploy-mode", mode, "--name", c.name + "-" + mode,
		"--num-executors", "2", "--executor-memory", "256m", "--archives", c.file + "#env", "--"}, c.command...)
	code, stdout, stderr := submitIn(t, work, confDir, 5*time.Minute, args...)
	if code != 0 {
		return fmt.Sprintf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	if n := strings.Count(stdout+stderr, "unpacked-"); n != 2 {
		return fmt.Sprintf("want both ranks to use the archive, saw %d:\n--- stdout\n%s\n--- stderr\n%s", n, stdout, stderr)
	}
	return ""
}

// TestVenvPackEnvironment: a numpy environment packed by venv-pack (about
// 30 MB), shipped with --archives env.tar.gz#env as the README recommends,
// runs the training command's env/bin/python in both deploy modes with the
// default settings.
func TestVenvPackEnvironment(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	work := t.TempDir()
	venvPackCase.write(t, filepath.Join(work, venvPackCase.file))
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			if msg := runArchive(t, hc.ConfDir, work, mode, venvPackCase); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// TestArchiveRepeat runs the venv-pack and 40,000-file archive jobs
// SPINDLE_REPEAT times in each deploy mode and reports how many passed;
// any failure fails the test. Without SPINDLE_REPEAT it skips, so the
// normal tier runs each case once (TestVenvPackEnvironment,
// TestArchiveOfManyFiles).
func TestArchiveRepeat(t *testing.T) {
	t.Parallel()
	n, _ := strconv.Atoi(os.Getenv("SPINDLE_REPEAT"))
	if n <= 0 {
		t.Skip("set SPINDLE_REPEAT=N to run the archive jobs N times in each deploy mode")
	}
	hc := hadooptest.Shared(t)
	for _, c := range []archiveCase{venvPackCase, manyFilesCase} {
		work := t.TempDir()
		c.write(t, filepath.Join(work, c.file))
		for _, mode := range []string{"client", "cluster"} {
			passed := 0
			for i := range n {
				start := time.Now()
				if msg := runArchive(t, hc.ConfDir, work, mode, c); msg != "" {
					t.Errorf("%s %s run %d of %d failed:\n%s", c.name, mode, i+1, n, msg)
					continue
				}
				passed++
				t.Logf("%s %s run %d of %d passed in %s", c.name, mode, i+1, n, time.Since(start).Round(time.Second))
			}
			t.Logf("SUMMARY %s %s: %d of %d passed", c.name, mode, passed, n)
		}
	}
}
