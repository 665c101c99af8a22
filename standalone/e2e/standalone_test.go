package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/standalone/client"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

var feedcheckEpoch = regexp.MustCompile(`feedcheck rank=(\d+) epoch=(\d+) rows=(\d+)`)

// jobArgs runs feedcheck over data with 2 ranks; delay slows each batch
// so the job is still running when the test breaks something.
func jobArgs(name, data string, delay time.Duration) []string {
	return []string{"--name", name, "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "512m",
		"--input", data + "/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "100",
		"--epochs", "2", "--", feedcheckBin, "--batch-delay", delay.String()}
}

// The leader master is killed while a job runs: a new leader takes over,
// the job succeeds, and new submissions work.
func TestJobSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 4000)
	j := c.submit(data, jobArgs("survivor", data, 40*time.Millisecond)...)
	c.waitFor(60*time.Second, "both executors running", func(st *client.Status) bool {
		return running(appExecutors(st, "survivor")) == 2
	})
	l := c.leader()
	killed := time.Now()
	c.masters[l].kill()
	select {
	case <-j.done:
		t.Fatalf("the job ended before the leader was killed; make it longer\n%s", j.stderr.String())
	default:
	}
	nl := c.leader()
	t.Logf("killed leader %s; %s leads %s later", c.masters[l].name, c.masters[nl].name, time.Since(killed).Round(time.Millisecond))
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("job failed after the leader was killed (exit %d)\n--- stdout\n%s--- stderr\n%s", code, j.stdout.String(), j.stderr.String())
	}
	if n := len(feedcheckEpoch.FindAllString(j.stdout.String(), -1)); n != 4 {
		t.Fatalf("want 2 ranks x 2 epochs of feedcheck lines, got %d:\n%s", n, j.stdout.String())
	}
	// A new job, data-parallel logistic regression whose ranks exchange
	// gradients directly, runs on the surviving masters.
	j2 := c.submit(data, "--name", "after-failover", "--num-executors", "2", "--executor-memory", "512m",
		"--input", data+"/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
		"--epochs", "3", "--shuffle", "--seed", "3", "--", logregBin, "--lr", "0.5")
	if code := j2.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("job after failover failed (exit %d)\n--- stderr\n%s", code, j2.stderr.String())
	}
	finals := regexp.MustCompile(`\[rank (\d)\] final rank=\d epochs=3 loss=\S+ accuracy=(\S+) weights=(\S+)`).FindAllStringSubmatch(j2.stdout.String(), -1)
	if len(finals) != 2 || finals[0][3] != finals[1][3] {
		t.Fatalf("want both ranks to end with the same weights:\n%s\n--- stderr\n%s", j2.stdout.String(), j2.stderr.String())
	}
}

// A worker is killed while a job runs: the job fails quickly with a
// message naming the lost worker and host.
func TestJobFailsWhenWorkerKilled(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1) // one executor per worker: both workers are used
	data := generate(t, 4000)
	j := c.submit(data, jobArgs("victim", data, 200*time.Millisecond)...)
	var victim string
	c.waitFor(60*time.Second, "both executors running", func(st *client.Status) bool {
		es := appExecutors(st, "victim")
		if running(es) != 2 {
			return false
		}
		victim = es[1].GetWorkerId()
		return true
	})
	killed := time.Now()
	for _, w := range c.workers {
		if w.name == victim {
			w.kill()
		}
	}
	code := j.wait(t, 2*time.Minute)
	took := time.Since(killed)
	stderr := j.stderr.String()
	if code == 0 {
		t.Fatalf("job succeeded without worker %s\n%s", victim, stderr)
	}
	want := fmt.Sprintf("worker %s (host 127.0.0.1) stopped heartbeating", victim)
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "was lost") {
		t.Fatalf("job's error does not say %q:\n%s", want, stderr)
	}
	t.Logf("job failed %s after worker %s was killed", took.Round(time.Millisecond), victim)
	st := c.waitFor(20*time.Second, "the worker marked lost", func(st *client.Status) bool { return aliveWorkers(st) == 1 })
	for _, e := range appExecutors(st, "victim") {
		if e.GetWorkerId() == victim && e.GetState() != pb.ExecutorState_EXECUTOR_STATE_LOST {
			t.Errorf("executor %s on the killed worker is %v", e.GetId(), e.GetState())
		}
	}
}

// spindle kill stops a running job; its submit fails saying so.
func TestKillCommand(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 4000)
	j := c.submit(data, jobArgs("doomed", data, 200*time.Millisecond)...)
	c.waitFor(60*time.Second, "both executors running", func(st *client.Status) bool {
		return running(appExecutors(st, "doomed")) == 2
	})
	out, code := spindleCmd(t, "kill", "--master", c.masterURL(), "--reason", "maintenance", "doomed")
	if code != 0 || !strings.Contains(out, "killed app-") {
		t.Fatalf("spindle kill: exit %d\n%s", code, out)
	}
	if code := j.wait(t, time.Minute); code == 0 {
		t.Fatal("killed job succeeded")
	}
	if !strings.Contains(j.stderr.String(), "killed by an admin (spindle kill): maintenance") {
		t.Fatalf("job's error does not say it was killed:\n%s\n--- stdout\n%s", j.stderr.String(), j.stdout.String())
	}
	out, code = spindleCmd(t, "status", "--master", c.masterURL())
	if code != 0 || !regexp.MustCompile(`doomed\s+KILLED`).MatchString(out) {
		t.Fatalf("spindle status: exit %d\n%s", code, out)
	}
	// Killing it again stops nothing: it says how the application ended,
	// by id or by name, and does not exit 0.
	for _, app := range []string{"doomed"} {
		out, code = spindleCmd(t, "kill", "--master", c.masterURL(), app)
		if code != 1 || !strings.Contains(out, "already ended: KILLED (killed by an admin (spindle kill): maintenance)") {
			t.Fatalf("spindle kill of an ended application: exit %d\n%s", code, out)
		}
	}
	if out, code = spindleCmd(t, "kill", "--master", c.masterURL(), "no-such-app"); code != 2 || !strings.Contains(out, "no-such-app") {
		t.Fatalf("spindle kill of an unknown application: exit %d\n%s", code, out)
	}
}

// Every master is killed and restarted on its data directory: the cluster
// state (workers, applications, executors) is back.
func TestFullRestartKeepsState(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 1000)
	j := c.submit(data, jobArgs("remembered", data, 0)...)
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("job failed (exit %d)\n%s", code, j.stderr.String())
	}
	before := c.waitFor(30*time.Second, "the job's app to finish", func(st *client.Status) bool {
		for _, a := range st.Cluster.GetApps() {
			if a.GetName() == "remembered" && a.GetState() == pb.AppState_APP_STATE_FINISHED {
				return len(appExecutors(st, "remembered")) == 2
			}
		}
		return false
	})
	for _, m := range c.masters {
		m.kill()
	}
	for _, m := range c.masters {
		m.start(t)
	}
	after := c.waitFor(60*time.Second, "the state back after a full restart", func(st *client.Status) bool {
		return len(st.Cluster.GetApps()) == len(before.Cluster.GetApps()) && aliveWorkers(st) == 2
	})
	for i, a := range before.Cluster.GetApps() {
		b := after.Cluster.GetApps()[i]
		if a.GetId() != b.GetId() || a.GetState() != b.GetState() {
			t.Errorf("app %s/%v came back as %s/%v", a.GetId(), a.GetState(), b.GetId(), b.GetState())
		}
	}
	if len(after.Cluster.GetExecutors()) != len(before.Cluster.GetExecutors()) {
		t.Errorf("executors: %d before, %d after", len(before.Cluster.GetExecutors()), len(after.Cluster.GetExecutors()))
	}
	out, code := spindleCmd(t, "status", "--master", c.masterURL())
	if code != 0 || !strings.Contains(out, "remembered") || !strings.Contains(out, "leader") {
		t.Fatalf("spindle status after restart: exit %d\n%s", code, out)
	}
}
