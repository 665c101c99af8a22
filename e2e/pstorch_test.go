package e2e

import (
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var sparseTorchLine = regexp.MustCompile(`sparse-embedding-torch: rank (\d) auc (\S+) \(known model (\S+)\) accuracy (\S+) \(majority (\S+)\) steps (\d+) pushes (\d+)`)

// A PyTorch job trains a sparse embedding + logistic model whose tables
// live on Spindle's parameter server, through spindle.ps.Embedding and
// each worker's executor proxy, under BSP: both workers end with the same
// model, close to the one that made the data and far better than chance,
// and every push their backward passes made reached the servers.
func TestPyTorchEmbeddingOnBuiltinPS(t *testing.T) {
	// Not parallel: its four processes of servers and workers beside
	// other tests' jobs missed heartbeats on a 2-core machine.
	needTorch(t)
	r := spindle(t, repoRoot, submitArgs("--master", "local[2]", "--num-ps", "2", "--conf", "spindle.ps.staleness=bsp",
		"--", python, "examples/sparse-embedding-torch/train.py")...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	lines := sparseTorchLine.FindAllStringSubmatch(r.stdout+r.stderr, -1)
	if len(lines) != 2 {
		t.Fatalf("want a result line from each of 2 workers:\n%s", r)
	}
	for _, m := range lines {
		trained, _ := strconv.ParseFloat(m[2], 64)
		known, _ := strconv.ParseFloat(m[3], 64)
		acc, _ := strconv.ParseFloat(m[4], 64)
		majority, _ := strconv.ParseFloat(m[5], 64)
		steps, _ := strconv.Atoi(m[6])
		pushes, _ := strconv.Atoi(m[7])
		if trained < 0.75 || math.Abs(trained-known) > 0.05 {
			t.Errorf("rank %s: AUC %.4f, want at least 0.75 and within 0.05 of the known model's %.4f", m[1], trained, known)
		}
		if acc < majority+0.05 {
			t.Errorf("rank %s: accuracy %.4f is not clearly above the majority guess's %.4f", m[1], acc, majority)
		}
		// 2 workers, each step's push acknowledged by both servers.
		if steps == 0 || pushes != 2*steps*2 {
			t.Errorf("rank %s: servers applied %d pushes of %d steps, want %d", m[1], pushes, steps, 2*steps*2)
		}
		if m[2] != lines[0][2] || m[4] != lines[0][4] {
			t.Errorf("rank %s scores AUC %s, accuracy %s; rank %s %s, %s: under BSP both score the same model",
				m[1], m[2], m[4], lines[0][1], lines[0][2], lines[0][4])
		}
	}
	if n := serversRunning(t); n != 0 {
		t.Errorf("%d parameter servers outlived the job", n)
	}
}

// psEarlyExit is a Python worker that does not call close(): worker 0
// stops after 5 steps and exits 0, worker 1 goes on to 30.
const psEarlyExit = `
import numpy as np, spindle, spindle.ps
ps = spindle.ps.connect()
ps.declare("w", 2, optimizer="sgd", lr=0.1)
keys = np.arange(100, dtype=np.uint64)
steps = 5 if spindle.role_rank() == 0 else 30
for _ in range(steps):
    ps.pull("w", keys)
    ps.push("w", keys, np.ones((100, 2), dtype=np.float32))
    ps.clock()
print("ps-early-exit rank", spindle.role_rank(), "clocks", ps.stats()["servers"][0]["clocks"], flush=True)
`

// A Python worker that ends well without leaving the servers is left for
// by its executor: under BSP the other worker does not wait for its clock.
func TestPythonWorkerEndsWithoutClosing(t *testing.T) {
	// Not parallel: its four processes of servers and workers beside
	// other tests' jobs missed heartbeats on a 2-core machine.
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		t.Skipf("%s cannot import numpy: %v", python, err)
	}
	r := spindle(t, t.TempDir(), submitArgs("--master", "local[2]", "--num-ps", "1",
		"--conf", "spindle.ps.waitTimeout=20s", "--", python, "-c", psEarlyExit)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if !strings.Contains(r.stdout, "ps-early-exit rank 1 clocks [-1, 30]") {
		t.Fatalf("worker 1 did not finish its 30 steps with worker 0 gone:\n%s", r)
	}
	if r.elapsed > 15*time.Second {
		t.Errorf("the job took %s: worker 1 waited for the finished worker", r.elapsed)
	}
}
