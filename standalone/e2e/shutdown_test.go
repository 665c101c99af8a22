package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/standalone/client"
)

// TestWorkerShutdownNamed: a worker stopped on purpose (SIGTERM) is not
// reported as lost: the job's error says which worker shut down.
func TestWorkerShutdownNamed(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 4000)
	j := c.submit(data, jobArgs("victim", data, 200*time.Millisecond)...)
	c.waitFor(60*time.Second, "both executors running", func(st *client.Status) bool {
		return running(appExecutors(st, "victim")) == 2
	})
	w := c.workers[1]
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-w.done
	w.cmd = nil
	if code := j.wait(t, 2*time.Minute); code == 0 {
		t.Fatal("the job survived its worker's shutdown")
	}
	stderr := j.stderr.String()
	if !strings.Contains(stderr, "worker w2 shut down") {
		t.Fatalf("the job's error does not say worker w2 shut down:\n%s", stderr)
	}
}

// TestRestartOnCluster: under spindle.failure.policy restart a failed rank
// on a standalone cluster stops the gang and a new generation of
// executors, placed afresh, runs the job to success.
func TestRestartOnCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 1000)
	script := `echo "rank $SPINDLE_RANK generation $SPINDLE_GENERATION"
if [ "$SPINDLE_GENERATION" = 0 ] && [ "$SPINDLE_RANK" = 1 ]; then exit 3; fi`
	j := c.submit(data, "--name", "phoenix", "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "512m",
		"--input", data+"/*.parquet", "--conf", "spindle.failure.policy=restart", "--", "/bin/sh", "-c", script)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("restarted job: exit %d\n%s\n%s", code, j.stdout.String(), j.stderr.String())
	}
	for _, want := range []string{"[rank 0] rank 0 generation 1", "[rank 1] rank 1 generation 1"} {
		if !strings.Contains(j.stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, j.stdout.String())
		}
	}
}
