package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// Binaries built once for every test.
var (
	spindleBin   string
	feedcheckBin string
	logregBin    string
	rolecheckBin string
	rowcheckBin  string
	// shrinkcheckBin allreduces without input and goes on in a smaller
	// world in place (e2e/shrinkcheck).
	shrinkcheckBin string
	// rowshrinkBin allreduces row-id checksums of its input and goes on
	// in a smaller world in place (e2e/rowshrink).
	rowshrinkBin string
	sparseLRBin  string
	repoRoot     string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	repoRoot = testbin.Root()
	// The package's binaries and TMPDIR, for what the tests and their
	// processes leave in it (a killed executor's socket directory).
	// Nothing beside the binaries: spindle carries its Python package inside.
	_, cleanup, err := testbin.Setup(context.Background(), "spindle-e2e-",
		testbin.Bin{Out: &spindleBin, Pkg: "./cmd/spindle"},
		testbin.Bin{Out: &feedcheckBin, Pkg: "./e2e/feedcheck"},
		testbin.Bin{Out: &logregBin, Pkg: "./examples/logreg"},
		testbin.Bin{Out: &rolecheckBin, Pkg: "./e2e/rolecheck"},
		testbin.Bin{Out: &rowcheckBin, Pkg: "./e2e/rowcheck"},
		testbin.Bin{Out: &shrinkcheckBin, Pkg: "./e2e/shrinkcheck"},
		testbin.Bin{Out: &rowshrinkBin, Pkg: "./e2e/rowshrink"},
		testbin.Bin{Out: &sparseLRBin, Pkg: "./examples/sparse-lr"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	return m.Run()
}

// result is how one spindle command ended.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %s\n--- stdout\n%s--- stderr\n%s", r.code, r.elapsed, r.stdout, r.stderr)
}

// spindle runs the spindle binary with args in dir and waits for it.
func spindle(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return spindleEnv(t, dir, nil, args...)
}

// spindleEnv is spindle with extra environment variables.
func spindleEnv(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return spindleWatched(t, dir, env, nil, args...)
}

// spindleWatched is spindleEnv that also copies the command's stderr, as
// it comes, to watch (when not nil): for a test that acts on what the job
// says while it runs.
func spindleWatched(t *testing.T, dir string, env []string, watch *syncbuf.Buffer, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, spindleBin, args...)
	cmd.Dir = dir
	cmd.Env = append(testEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if watch != nil {
		cmd.Stderr = io.MultiWriter(&stderr, watch)
	}
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run spindle %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("spindle %v did not finish in time:\n%s", args, r)
	}
	return r
}

// testEnv is the environment of spindle commands: no admin defaults from
// the machine, quick heartbeats.
func testEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPINDLE_") && !strings.HasPrefix(kv, "HADOOP_") {
			env = append(env, kv)
		}
	}
	return env
}

// fastConf are settings that keep failure tests quick; the timeout and
// the grace period stretch (testutil.Scale, at the load when a job is
// submitted). The heartbeat timeout is not short: with 3 s, executors and
// parameter servers of healthy jobs were declared lost on a loaded
// machine (no heartbeat for 3s) and no test waits on it to detect a
// failure.
func fastConf() []string {
	return []string{
		"--conf", "spindle.executor.heartbeatInterval=200ms",
		"--conf", "spindle.executor.heartbeatTimeout=" + testutil.Scale(10*time.Second).String(),
		"--conf", "spindle.executor.stopGracePeriod=" + testutil.Scale(2*time.Second).String(),
		"--conf", "spindle.log.level=warn",
	}
}

func submitArgs(extra ...string) []string {
	return append(append([]string{"submit"}, fastConf()...), extra...)
}

var feedcheckLine = regexp.MustCompile(`feedcheck rank=(\d+) epoch=(\d+) rows=(\d+) batches=(\d+) sum=(\S+) order=(\S+)`)

// epochLine is one epoch as feedcheck saw it.
type epochLine struct {
	rank, epoch, rows, batches int
	sum                        float64
	order                      string
}

func parseFeedcheck(t *testing.T, out string) []epochLine {
	t.Helper()
	var lines []epochLine
	for _, m := range feedcheckLine.FindAllStringSubmatch(out, -1) {
		atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
		sum, _ := strconv.ParseFloat(m[5], 64)
		lines = append(lines, epochLine{atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4]), sum, m[6]})
	}
	return lines
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

func readPids(t *testing.T, dir string) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
