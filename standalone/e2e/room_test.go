package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/standalone/client"
)

// TestRoom: a job that no worker could ever hold is refused at once (exit
// 2, naming the largest worker) instead of waiting out the gang timeout;
// one that could fit later says it waits, and what it needs, and status
// shows it WAITING until room frees up.
func TestRoom(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 4000)
	huge := c.submit(data, "--name", "huge", "--num-executors", "1", "--executor-memory", "100g",
		"--input", data+"/*.parquet", "--conf", "spindle.standalone.gangTimeout=5m", "--", feedcheckBin)
	if code := huge.wait(t, time.Minute); code != 2 || !strings.Contains(huge.stderr.String(), "no worker could ever hold") ||
		!strings.Contains(huge.stderr.String(), "the largest") {
		t.Fatalf("a job no worker can hold: exit %d, want 2 at once naming the largest worker:\n%s", code, huge.stderr.String())
	}

	// Two executors of 2 cores fill both 2-core workers.
	hog := c.submit(data, "--name", "hog", "--num-executors", "2", "--executor-cores", "2", "--executor-memory", "512m",
		"--input", data+"/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "100", "--epochs", "2",
		"--", feedcheckBin, "--batch-delay", "150ms")
	c.waitFor(60*time.Second, "the hog running", func(st *client.Status) bool { return running(appExecutors(st, "hog")) == 2 })
	waiter := c.submit(data, jobArgs("waiter", data, 0)...)
	c.waitFor(60*time.Second, "the waiter shown waiting", func(st *client.Status) bool {
		for _, a := range st.Cluster.GetApps() {
			if a.GetName() == "waiter" && a.Outcome() == "WAITING" {
				return true
			}
		}
		return false
	})
	out, code := spindleCmd(t, "status", "--master", c.masterURL(), "--app", "waiter")
	if code != 0 || !strings.Contains(out, "WAITING") || !strings.Contains(out, "waiting for room: need 2 x 1 core/512 MiB") {
		t.Fatalf("status of a waiting job: exit %d\n%s", code, out)
	}
	if code := hog.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("hog: exit %d\n%s", code, hog.stderr.String())
	}
	if code := waiter.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("waiter: exit %d\n%s", code, waiter.stderr.String())
	}
	if !strings.Contains(waiter.stderr.String(), "waiting for room: need 2 x 1 core/512 MiB; free:") {
		t.Errorf("the waiting submit did not say what it waited for:\n%s", waiter.stderr.String())
	}
}
