package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/standalone/client"
)

// TestWorkerLossIsNotTheJobsFault: a standalone worker that dies under a
// job (SIGKILL, as a crashed machine) loses its executor through no fault
// of the job: under the restart policy the job is restarted on the worker
// left even with spindle.failure.maxRestarts 0, which a failure of the
// job itself would have ended.
func TestWorkerLossIsNotTheJobsFault(t *testing.T) {
	c := startCluster(t, 2)
	data := generate(t, 4000)
	args := append([]string{"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=0"},
		jobArgs("preempted", data, 100*time.Millisecond)...)
	j := c.submit(data, args...)
	c.waitFor(60*time.Second, "both executors running", func(st *client.Status) bool {
		return running(appExecutors(st, "preempted")) == 2
	})
	c.workers[1].kill()
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("the job failed after losing a worker: exit %d\n%s\n%s", code, j.stdout.String(), j.stderr.String())
	}
	stderr := j.stderr.String()
	for _, want := range []string{"not the job's fault", "not counted against spindle.failure.maxRestarts; 1 of 10 such restarts"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

var workDirLine = regexp.MustCompile(`rank (\d) generation (\d) in \S*/(w\d)-work/`)

// TestFailingHostIsLeftOut: with spindle.failure.hostMaxFailures 1, the
// worker where a rank failed gets none of the next generation's executors.
func TestFailingHostIsLeftOut(t *testing.T) {
	c := startCluster(t, 2)
	data := generate(t, 1000)
	script := `echo "rank $SPINDLE_RANK generation $SPINDLE_GENERATION in $(pwd)/"
if [ "$SPINDLE_GENERATION" = 0 ] && [ "$SPINDLE_RANK" = 1 ]; then exit 3; fi`
	j := c.submit(data, "--name", "badhost", "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "512m",
		"--input", data+"/*.parquet", "--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.hostMaxFailures=1",
		"--", "/bin/sh", "-c", script)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("restarted job: exit %d\n%s\n%s", code, j.stdout.String(), j.stderr.String())
	}
	where := map[[2]string]string{}
	for _, m := range workDirLine.FindAllStringSubmatch(j.stdout.String(), -1) {
		where[[2]string{m[1], m[2]}] = m[3]
	}
	bad := where[[2]string{"1", "0"}]
	if bad == "" || where[[2]string{"0", "1"}] == "" || where[[2]string{"1", "1"}] == "" {
		t.Fatalf("cannot tell where the ranks ran (%v):\n%s", where, j.stdout.String())
	}
	if where[[2]string{"0", "1"}] == bad || where[[2]string{"1", "1"}] == bad {
		t.Errorf("generation 1 was placed on worker %s, where rank 1 failed (%v)", bad, where)
	}
	if !strings.Contains(j.stderr.String(), "host "+bad+" failed the job 1 times") {
		t.Errorf("the exclusion of %s was not announced:\n%s", bad, j.stderr.String())
	}
}
