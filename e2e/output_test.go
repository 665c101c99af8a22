package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestLongOutputLineDrained: a training process that writes a 3 MiB line
// (a progress bar redrawn with "\r" and never ended) must not stall its
// output: the job ends normally, the redraws become lines of their own,
// and the over-long line arrives cut, not whole.
func TestLongOutputLineDrained(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	script := `i=0; while [ $i -lt 3 ]; do printf 'step %d\r' $i >&2; i=$((i+1)); done; ` +
		`head -c 3145728 /dev/zero | tr '\0' x >&2; printf '\nafter the long line\n' >&2; echo done`
	r := spindle(t, data, submitArgs("--num-executors", "1", "--input", data, "--", "/bin/sh", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%.4000s", r)
	}
	for _, want := range []string{"[rank 0] step 0\n", "[rank 0] step 2\n", "[rank 0] after the long line\n", "more bytes dropped"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%.4000s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "[rank 0] done") {
		t.Errorf("stdout lacks the last line:\n%.4000s", r.stdout)
	}
	if len(r.stderr) > 1<<20 {
		t.Errorf("the over-long line was passed on whole (%d bytes of stderr)", len(r.stderr))
	}
}

// TestFailureSummaryOnce: one rank fails; the submit prints one summary
// naming it with its stderr tail, the ranks Spindle stopped are not
// reported as failed (no "killed by signal SIGTERM"), and the log does not
// repeat the tail.
func TestFailureSummaryOnce(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 2000, 2)
	r := spindle(t, data, append(submitArgs("--num-executors", "3", "--input", data, "--batch-rows", "10",
		"--epochs", "1000", "--conf", "spindle.log.level=info"), "--", feedcheckBin, "--fail-rank", "1", "--fail-code", "7", "--batch-delay", "2ms")...)
	if r.code != 1 {
		t.Fatalf("want exit status 1:\n%s", r)
	}
	tail := "feedcheck: rank 1 failing on purpose"
	// Once as the rank's own output, once in the summary.
	if n := strings.Count(r.stderr, tail); n != 2 {
		t.Errorf("the stderr tail appears %d times, want 2 (the rank's line and the summary):\n%s", n, r.stderr)
	}
	for _, bad := range []string{"SIGTERM", "training process failed: rank 0", "training process failed: rank 2"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr reports a rank Spindle stopped as failed (%q):\n%s", bad, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "failed: rank 1 (host") || !strings.Contains(r.stderr, "stopping the other 2 executors") {
		t.Errorf("no summary naming rank 1 and the stopped ranks:\n%s", r.stderr)
	}
}

// TestSecondInterruptStopsAtOnce: the first Ctrl-C says what is happening
// at once; a second one does not wait out the grace period of a training
// process that ignores SIGTERM.
func TestSecondInterruptStopsAtOnce(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	pids := t.TempDir()
	script := `trap "" TERM; echo $$ > ` + pids + `/rank.pid; echo ready; exec sleep 1000`
	cmd := exec.Command(spindleBin, append(submitArgs("--num-executors", "1", "--input", data,
		"--conf", "spindle.executor.stopGracePeriod=60s"), "--", "/bin/sh", "-c", script)...)
	cmd.Dir, cmd.Env = data, testEnv()
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("the training process", func() bool { return strings.Contains(out.String(), "[rank 0] ready") }))
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("word of the interruption", func() bool { return strings.Contains(out.String(), "Ctrl-C again") }))
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("exit %v, want status 130:\n%s", err, out.String())
		}
	case <-time.After(testutil.Scale(30 * time.Second)):
		t.Fatalf("a second Ctrl-C did not stop the job within 30s (grace 60s):\n%s", out.String())
	}
	t.Logf("stopped %s after the second Ctrl-C", time.Since(start).Round(time.Millisecond))
	for _, pid := range readPids(t, pids) {
		testutil.WaitFor(t, 10*time.Second, testutil.Holds(fmt.Sprintf("training process %d to be gone", pid), func() bool { return !alive(pid) }))
	}
}
