package e2e

import (
	"math"
	"regexp"
	"strconv"
	"testing"
)

var sparseTorchLine = regexp.MustCompile(`sparse-embedding-torch: rank (\d) auc (\S+) \(known model (\S+)\) accuracy (\S+) \(majority (\S+)\) steps (\d+) pushes (\d+)`)

// A PyTorch job trains a sparse embedding + logistic model whose tables
// live on Spindle's parameter server, through spindle.ps.Embedding and
// each worker's executor proxy, under BSP: both workers end with the same
// model, close to the one that made the data and far better than chance,
// and every push their backward passes made reached the servers.
func TestPyTorchEmbeddingOnBuiltinPS(t *testing.T) {
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
