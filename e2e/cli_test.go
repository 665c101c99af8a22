package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// errorLines returns the "spindle: " lines of a command's stderr.
func errorLines(r result) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if strings.HasPrefix(l, "spindle: ") {
			out = append(out, l)
		}
	}
	return out
}

// wantUsageError checks that r exited 2 with one error line holding every
// string of want, and without printing the command's help.
func wantUsageError(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", r.code, r)
	}
	lines := errorLines(r)
	if len(lines) != 1 {
		t.Fatalf("want exactly one error line:\n%s", r)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("error %q does not mention %q", lines[0], w)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "USAGE:") {
		t.Errorf("the help was printed for a usage error:\n%s", r)
	}
}

// TestUsageErrors: an unknown flag or command is one line and exit 2, with
// a suggestion when the mistake is close to a real name.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown flag", []string{"submit", "--bogus", "--", "true"}, []string{"unknown flag --bogus", "spindle submit"}},
		{"misspelt flag", []string{"submit", "--num-executor", "2", "--", "true"}, []string{"--num-executor", `did you mean --num-executors?`}},
		{"flag without value", []string{"submit", "--epochs"}, []string{"-epochs"}},
		{"misspelt command", []string{"submt", "--input", "x"}, []string{`unknown command "submt"`, `did you mean "submit"?`}},
		{"unknown command", []string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"help for an unknown command", []string{"help", "stauts"}, []string{"stauts", "status"}},
		{"unknown flag of the app", []string{"--bogus"}, []string{"unknown flag --bogus"}},
		{"required flag left out", []string{"history"}, []string{"spindle history needs --dir"}},
		{"required flag of a subcommand left out", []string{"ps", "export", "ckpt"}, []string{"spindle ps export needs --out"}},
		{"ps export without a checkpoint", []string{"ps", "export", "--out", "x", "/nonexistent/ckpt"}, []string{"no complete checkpoint in /nonexistent/ckpt"}},
		{"ps export without a directory", []string{"ps", "export", "--out", "x"}, []string{"want one CHECKPOINT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantUsageError(t, spindle(t, t.TempDir(), tc.args...), tc.want...)
		})
	}
}

// TestValuesKeepCommas: --env and --conf values are not split at commas.
func TestValuesKeepCommas(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	r := spindle(t, data, submitArgs("--num-executors", "1", "--input", data,
		"--env", "CUDA_VISIBLE_DEVICES=0,1", "--env", "LIST=a,b,c",
		"--conf", "spindle.input.columns=f0,f1",
		"--", "/bin/sh", "-c", `echo "cuda=$CUDA_VISIBLE_DEVICES list=$LIST"`)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if !strings.Contains(r.stdout, "[rank 0] cuda=0,1 list=a,b,c") {
		t.Errorf("--env values lost their commas:\n%s", r)
	}
}

// TestVersionNamesCommit: spindle version says which release and commit
// and which Go built it, not just "dev", when built as the Makefile does.
// Built as the test programs are (-trimpath, no DWARF), it takes their
// compiled packages from the build cache and only links: without
// -trimpath a clone at a new path compiles the module's 69 packages
// again, 32 CPU-s against 3.5.
func TestVersionNamesCommit(t *testing.T) {
	t.Parallel()
	const sha = "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "spindle")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-w -X main.version=v9.9.9-test -X main.commit="+sha, "-o", bin, "./cmd/spindle")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	for _, w := range []string{"spindle v9.9.9-test", "commit " + sha, runtime.Version()} {
		if !strings.Contains(string(out), w) {
			t.Errorf("version %q lacks %q", strings.TrimSpace(string(out)), w)
		}
	}
}

// TestSettingsCheckedBeforeRunning: bad settings of every kind end the
// submit with exit 2 and one line naming the culprit, before any training
// process runs.
func TestSettingsCheckedBeforeRunning(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	confDir := t.TempDir()
	writeFile(t, filepath.Join(confDir, "spindle-defaults.conf"), "spindle.feed.epochs 1\n")
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		t.Log("this machine has a GPU; the --executor-gpus case is left out")
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"zero duration", nil, []string{"--conf", "spindle.executor.heartbeatInterval=0s"}, []string{"spindle.executor.heartbeatInterval", "zero"}},
		{"port out of range", nil, []string{"--conf", "spindle.driver.port=70000"}, []string{"spindle.driver.port", "65535"}},
		{"master port out of range", nil, []string{"--master", "spindle://m1:99999"}, []string{"m1:99999", "65535"}},
		{"missing conf dir", []string{"SPINDLE_CONF_DIR=" + filepath.Join(confDir, "nope")}, nil, []string{"SPINDLE_CONF_DIR", "nope"}},
		{"reserved env", nil, []string{"--env", "SPINDLE_RANK=7"}, []string{"--env SPINDLE_RANK"}},
		{"missing --files", nil, []string{"--files", "nope.py"}, []string{"--files nope.py"}},
		{"duplicate --files", nil, []string{"--files", "a/x.py,b/x.py"}, []string{"--files a/x.py", "--files b/x.py"}},
		{"bad log level", nil, []string{"--log-level", "loud"}, []string{"--log-level", "loud"}},
		{"disagreeing flags", nil, []string{"--master", "local[3]", "--num-executors", "2"}, []string{"local[3]", "--num-executors 2", "disagree"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"submit", "--input", data}, tc.args...), "--", feedcheckBin)
			r := spindleEnv(t, data, tc.env, args...)
			wantUsageError(t, r, tc.want...)
			if strings.Contains(r.stdout+r.stderr, "feedcheck rank=") {
				t.Errorf("a training process ran despite the bad settings:\n%s", r)
			}
		})
	}
	if _, err := os.Stat("/dev/nvidia0"); err != nil {
		t.Run("more GPUs than the machine has", func(t *testing.T) {
			r := spindle(t, data, "submit", "--input", data, "--executor-gpus", "1", "--", feedcheckBin)
			wantUsageError(t, r, "--executor-gpus", "this machine has 0")
		})
	}
}

// TestConfFilesAndPrecedence: an admin's defaults file with comments and
// quotes works, and explicit flags win over it.
func TestConfFilesAndPrecedence(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 300, 1)
	confDir := t.TempDir()
	writeFile(t, filepath.Join(confDir, "spindle-defaults.conf"),
		"# admin defaults\nspindle.master local[3]   # three ranks\nspindle.app.name \"nightly #7\"\nspindle.feed.epochs 2 # two passes\n")
	r := spindleEnv(t, data, []string{"SPINDLE_CONF_DIR=" + confDir},
		submitArgs("--num-executors", "2", "--input", data, "--", feedcheckBin)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	lines := parseFeedcheck(t, r.stdout)
	ranks, epochs := map[int]bool{}, map[int]bool{}
	for _, l := range lines {
		ranks[l.rank], epochs[l.epoch] = true, true
	}
	if len(ranks) != 2 || len(epochs) != 2 {
		t.Errorf("ran %d ranks and %d epochs, want 2 ranks (--num-executors over local[3]) and 2 epochs:\n%s", len(ranks), len(epochs), r)
	}
}

// TestIgnoredSettingsWarn: settings that would do nothing say so.
func TestIgnoredSettingsWarn(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	r := spindle(t, data, submitArgs("--num-executors", "1", "--input", data, "--queue", "prod",
		"--conf", "spindle.master.workerTimeout=3s", "--", feedcheckBin)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	for _, w := range []string{
		"--queue: the queue (spindle.yarn.queue) applies to --master yarn only",
		"--conf: spindle.master.workerTimeout is read by spindle master, not by spindle submit",
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("no warning %q:\n%s", w, r.stderr)
		}
	}
}

// TestSubmitLogLevel: submit takes --log-level like master and worker.
func TestSubmitLogLevel(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	r := spindle(t, data, "submit", "--num-executors", "1", "--input", data, "--log-level", "debug", "--", feedcheckBin)
	if r.code != 0 || !strings.Contains(r.stderr, "level=DEBUG") {
		t.Fatalf("want debug logs:\n%s", r)
	}
	r = spindle(t, data, "submit", "--num-executors", "1", "--input", data, "--log-level", "error", "--", feedcheckBin)
	if r.code != 0 || strings.Contains(r.stderr, "level=INFO") {
		t.Fatalf("want no info logs:\n%s", r)
	}
}

// TestRelativeFiles: a relative --files path is made absolute at submit
// and reaches the training process.
func TestRelativeFiles(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	writeFile(t, filepath.Join(data, "conf", "params.txt"), "lr=0.5\n")
	r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--files", "conf/params.txt",
		"--", "/bin/sh", "-c", `cat "$SPINDLE_FILES_DIR/params.txt"`)...)
	if r.code != 0 || strings.Count(r.stdout, "lr=0.5") != 2 {
		t.Fatalf("want both ranks to read the shipped file:\n%s", r)
	}
}

// TestJobTimeout: a job outliving spindle.job.timeout is stopped and
// reported as timed out, exit 1.
func TestJobTimeout(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--conf", "spindle.job.timeout=2s",
		"--", "/bin/sh", "-c", "sleep 60")...)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r)
	}
	// The last line says why; the executors' own lines about the ranks
	// they stopped may come before it.
	lines := errorLines(r)
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "timed out after 2s (spindle.job.timeout)") {
		t.Fatalf("want a last line saying the job timed out:\n%s", r)
	}
	if r.elapsed > 30*time.Second {
		t.Errorf("the timed-out job took %s to stop", r.elapsed)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestShipPythonEnvironment: --archives unpacks an environment under its
// alias, --py-files puts code on PYTHONPATH, and --python runs the
// training command with the shipped interpreter.
func TestShipPythonEnvironment(t *testing.T) {
	t.Parallel()
	// The system interpreter: a virtualenv's would look for its pyvenv.cfg
	// and report its own path.
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	data := generate(t, "parquet", 100, 1)
	work := t.TempDir()
	// A packed environment whose interpreter is this machine's python3.
	writeTarGzLinks(t, filepath.Join(work, "env.tar.gz"), map[string]string{"bin/python": py}, map[string]string{"MARKER": "shipped env\n"})
	writeZipFiles(t, filepath.Join(work, "deps.zip"), map[string]string{"mylib/__init__.py": "VALUE = 42\n"})
	script := `import os, sys, mylib
env = os.path.join(os.environ["SPINDLE_FILES_DIR"], "env")
print("exe=%s value=%d marker=%s" % (sys.executable.endswith("env/bin/python"), mylib.VALUE, open(os.path.join(env, "MARKER")).read().strip()))`
	r := spindle(t, work, submitArgs("--num-executors", "2", "--input", data,
		"--archives", "env.tar.gz#env", "--py-files", "deps.zip", "--python", "env/bin/python",
		"--", "python3", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if strings.Count(r.stdout, "exe=True value=42 marker=shipped env") != 2 {
		t.Fatalf("the shipped interpreter, code or archive did not reach both ranks:\n%s", r)
	}
}

func writeTarGzLinks(t *testing.T, path string, links, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, target := range links {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.String())
}

func writeZipFiles(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.String())
}

// TestNoInput: a job that loads its own data needs no --input: it gets no
// feed and the rest of the environment contract.
func TestNoInput(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"arrow", "direct"} {
		t.Run(mode, func(t *testing.T) {
			r := spindle(t, t.TempDir(), submitArgs("--num-executors", "2", "--feed", mode,
				"--", "/bin/sh", "-c", `echo "rank=$SPINDLE_RANK/$SPINDLE_WORLD_SIZE torch=$RANK@$MASTER_ADDR feed=${SPINDLE_FEED-unset} mode=$SPINDLE_FEED_MODE"`)...)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			for rank := 0; rank < 2; rank++ {
				want := fmt.Sprintf("[rank %d] rank=%d/2 torch=%d@127.0.0.1 feed=unset mode=none", rank, rank, rank)
				if !strings.Contains(r.stdout, want) {
					t.Errorf("want %q:\n%s", want, r)
				}
			}
		})
	}
}
