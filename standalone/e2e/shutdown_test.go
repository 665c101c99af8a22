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
