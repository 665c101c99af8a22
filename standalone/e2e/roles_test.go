package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/standalone/client"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// Jobs with roles on the standalone cluster (two workers of 2 cores): a
// TF_CONFIG-reading job and a real TensorFlow parameter-server job.
func TestRolesOnStandalone(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	t.Run("tf-config", func(t *testing.T) { tfConfigJob(t, c) })
	t.Run("tensorflow", func(t *testing.T) { tensorFlowJob(t, c) })
	t.Run("builtin-ps", func(t *testing.T) { builtinPSJob(t, c) })
}

// builtinPSJob runs Spindle's own parameter server on the cluster: 2
// workers and 2 servers of a core each, the servers run by the workers'
// own spindle binary. The sparse example trains to within 0.01 AUC of
// its known model, and every server is stopped at the end.
func builtinPSJob(t *testing.T, c *cluster) {
	j := c.submit(t.TempDir(), "--name", "builtin-ps", "--num-executors", "2", "--executor-memory", "512m",
		"--num-ps", "2", "--ps-memory", "512m", "--conf", "spindle.ps.staleness=1",
		"--", sparseLRBin, "--rows", testbin.SparseLRRows, "--hot", testbin.SparseLRHot)
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("job failed (exit %d)\n--- stdout\n%s--- stderr\n%s", code, j.stdout.String(), j.stderr.String())
	}
	m := regexp.MustCompile(`\[worker 0\] sparse-lr: auc (\S+) \(known model (\S+)\).* 2 servers, (\d+) pushes applied`).FindStringSubmatch(j.stdout.String())
	if m == nil {
		t.Fatalf("no result from worker 0:\n%s", j.stdout.String())
	}
	trained, _ := strconv.ParseFloat(m[1], 64)
	known, _ := strconv.ParseFloat(m[2], 64)
	if trained < known-0.01 {
		t.Errorf("trained AUC %.4f is not within 0.01 of the known model's %.4f", trained, known)
	}
	if !strings.Contains(j.stderr.String(), `stopped_at_end="ps 0, ps 1"`) {
		t.Errorf("the servers were not stopped at the job's end:\n%s", j.stderr.String())
	}
}

// tfConfigJob runs a TF_CONFIG-reading job of 2 workers and 1 parameter
// server. The parameter server asks for 2 cores, the workers for 1: the
// gang fits only when the masters place the parameter server first (in
// request order the workers would take a core of each worker). Every
// process finds its role in TF_CONFIG at an address that answers as the
// task it names, the job ends with the workers, the parameter server is
// stopped, and spindle status shows each executor's role.
func tfConfigJob(t *testing.T, c *cluster) {
	data := generate(t, 2000)
	j := c.submit(data, "--name", "roles", "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "512m",
		"--num-ps", "1", "--ps-cores", "2", "--ps-memory", "512m", "--ps-command", rolecheckBin,
		"--input", data+"/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "100",
		"--", rolecheckBin)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("role job failed (exit %d)\n--- stdout\n%s--- stderr\n%s", code, j.stdout.String(), j.stderr.String())
	}
	out := j.stdout.String()
	for _, want := range []string{`\[worker 0\] rolecheck role=worker index=0 rank=0 rows=\d+ dialed=2`,
		`\[worker 1\] rolecheck role=worker index=1 rank=1 rows=\d+ dialed=2`, `\[ps 0\] rolecheck role=ps index=0 rank=2 rows=0`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no line matching %s:\n%s", want, out)
		}
	}
	if !strings.Contains(j.stderr.String(), `stopped_at_end="ps 0"`) {
		t.Errorf("the driver did not stop the parameter server at the end:\n%s", j.stderr.String())
	}

	st := c.waitFor(30*time.Second, "every executor of the job ended", func(st *client.Status) bool {
		es := appExecutors(st, "roles")
		for _, e := range es {
			if e.GetState() != pb.ExecutorState_EXECUTOR_STATE_EXITED {
				return false
			}
		}
		return len(es) == 3
	})
	roles := map[string]string{}
	for _, e := range appExecutors(st, "roles") {
		roles[e.GetId()] = e.GetRole() + "/" + e.GetWorkerId()
		if e.GetExitCode() != 0 {
			t.Errorf("executor %s (%s) exited %d: a parameter server stopped at the end is no failure", e.GetId(), e.GetRole(), e.GetExitCode())
		}
	}
	if !strings.HasPrefix(roles["exec-2"], "ps/") || !strings.HasPrefix(roles["exec-0"], "worker/") || !strings.HasPrefix(roles["exec-1"], "worker/") {
		t.Errorf("roles and workers %v, want exec-0 and exec-1 workers, exec-2 ps", roles)
	}
	if ps, w0, w1 := roles["exec-2"][3:], roles["exec-0"][7:], roles["exec-1"][7:]; ps == w0 || ps == w1 {
		t.Errorf("the 2-core ps shares a 2-core worker with a worker: %v", roles)
	}

	text, code := spindleCmd(t, "status", "--master", c.masterURL())
	if code != 0 {
		t.Fatalf("spindle status exit %d:\n%s", code, text)
	}
	if !regexp.MustCompile(`(?m)^EXECUTOR\s+APPLICATION\s+ROLE\s`).MatchString(text) ||
		!regexp.MustCompile(`(?m)^exec-2\s+\S+\s+ps\s+w\d\s+exited \(0\)`).MatchString(text) {
		t.Errorf("spindle status does not show the ps role:\n%s", text)
	}
}

// tensorFlowJob runs a real TensorFlow ParameterServerStrategy job: a
// chief, 2 workers and 1 parameter server, one core each, which fill the
// cluster. The job ends when the chief does; the servers are stopped.
func tensorFlowJob(t *testing.T, c *cluster) {
	venv := os.Getenv("SPINDLE_TEST_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-test-venv")
	}
	py := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no test venv at %s (scripts/install-deps.sh makes it, with tensorflow-cpu): %v", venv, err)
	}
	script := filepath.Join(testbin.Root(), "examples", "tensorflow", "train_ps.py")
	start := time.Now()
	j := c.submit(t.TempDir(), "--name", "tfps", "--chief", "--num-executors", "2", "--executor-memory", "512m",
		"--num-ps", "1", "--ps-memory", "512m", "--ps-command", py+" "+script, "--feed", "direct",
		"--env", "TF_CPP_MIN_LOG_LEVEL=2", "--conf", "spindle.driver.registrationTimeout=60s",
		"--", py, script, "--steps", "30")
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("TensorFlow job failed (exit %d)\n--- stdout\n%s--- stderr\n%s", code, j.stdout.String(), j.stderr.String())
	}
	m := regexp.MustCompile(`\[chief\] tfps steps=30 loss=(\S+) accuracy=(\S+) workers=2 ps=1`).FindStringSubmatch(j.stdout.String())
	if m == nil {
		t.Fatalf("no report from the chief:\n%s", j.stdout.String())
	}
	if acc, _ := strconv.ParseFloat(m[2], 64); acc < 0.9 {
		t.Errorf("accuracy %s after 30 steps, want >= 0.9", m[2])
	}
	if !strings.Contains(j.stderr.String(), `stopped_at_end="worker 0, worker 1, ps 0"`) {
		t.Errorf("the servers were not stopped at the job's end:\n%s", j.stderr.String())
	}
	t.Logf("TensorFlow job on the standalone cluster took %s", time.Since(start).Round(time.Millisecond))
}
