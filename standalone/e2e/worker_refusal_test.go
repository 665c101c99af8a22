package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
)

// workerArgs starts a worker of the test cluster under id.
func (c *cluster) workerArgs(id string) []string {
	return []string{"worker", "--masters", strings.Join(c.addrs, ","), "--id", id, "--addr", "127.0.0.1:0",
		"--advertise-host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--gpus", "0",
		"--work-dir", filepath.Join(c.dir, id+"-"+fmt.Sprint(time.Now().UnixNano())),
		"--conf", "spindle.worker.heartbeatInterval=200ms"}
}

// runWorker runs a worker that should stop on its own, and returns its
// exit code and output.
func runWorker(t *testing.T, env []string, args []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, spindleBin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("worker %v did not stop on its own:\n%s", args, out)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	return 0, string(out)
}

// TestWorkerRefusals: a second worker with a live worker's id is refused
// (exit 2, naming both addresses) and the live one keeps its place; a
// worker with the wrong cluster secret stops at once (exit 2) instead of
// waiting for masters it will never reach; a worker restarted under the id
// of a dead one takes it over.
func TestWorkerRefusals(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	code, out := runWorker(t, env(), c.workerArgs("w1"))
	if code != 2 || !strings.Contains(out, "worker id w1 is taken by the running worker at") || !strings.Contains(out, "--id") {
		t.Fatalf("a duplicate id: exit %d, want 2 naming the running worker:\n%s", code, out)
	}
	st := c.waitFor(10*time.Second, "both original workers alive", func(st *client.Status) bool { return aliveWorkers(st) == 2 })
	addrOf := func(st *client.Status, id string) string {
		for _, w := range st.Cluster.GetWorkers() {
			if w.GetId() == id && w.GetAlive() {
				return w.GetAddr()
			}
		}
		return ""
	}
	oldW2 := addrOf(st, "w2")

	var wrong []string
	for _, kv := range env() {
		if !strings.HasPrefix(kv, "SPINDLE_CLUSTER_SECRET=") {
			wrong = append(wrong, kv)
		}
	}
	wrong = append(wrong, "SPINDLE_CLUSTER_SECRET=not-the-cluster-secret-0123456789")
	code, out = runWorker(t, wrong, c.workerArgs("w9"))
	if code != 2 || !strings.Contains(out, "cluster secret") || !strings.Contains(out, c.addrs[0][:strings.LastIndex(c.addrs[0], ":")]) {
		t.Fatalf("a wrong secret: exit %d, want 2 naming the masters and the secret:\n%s", code, out)
	}

	c.workers[1].kill()
	p := &proc{name: "w2-again", log: filepath.Join(c.dir, "w2-again.log"), args: c.workerArgs("w2")}
	p.start(t)
	defer p.kill()
	c.waitFor(30*time.Second, "the restarted w2 registered in place of the dead one", func(st *client.Status) bool {
		a := addrOf(st, "w2")
		return a != "" && a != oldW2
	})
}
