package e2e

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var torchReplaced = regexp.MustCompile(`torchshrink replaced pid=(\d+) rank=(\d+) world=(\d+) step=(\d+) at_ms=(\d+)`)

// TestPyTorchReplacesAWorkerInPlace: under restart with
// spindle.failure.replaceWorkers, a PyTorch job of 4 workers without input
// (e2e/torchshrink: a DistributedDataParallel module over gloo) loses rank
// 1's training process (SIGKILL) once every rank trained 50 steps. The
// driver starts one replacement for rank 1; the survivors catch gloo's
// error and spindle.torch.reform re-forms their group of 4 with it, which
// joins in init_process_group and gets a survivor's model from catch_up.
// No gang restart: the three survivors keep their processes and ranks,
// every rank trains every step, all four end with the same model, and the
// job exits 0.
func TestPyTorchReplacesAWorkerInPlace(t *testing.T) {
	t.Parallel()
	needTorch(t)
	const steps = 300
	script := filepath.Join(repoRoot, "e2e", "torchshrink", "train.py")
	args := submitArgs("--num-executors", "4", "--conf", "spindle.failure.policy=restart",
		"--conf", "spindle.failure.replaceWorkers=true", "--",
		python, script, "--steps", strconv.Itoa(steps), "--pause", "0.02", "--ddp")
	cmd, out, ranks := startFourRanks(t, args, "torchshrink", torchShrinkAt)
	got, killed := killAndWait(t, cmd, out, ranks[1])
	if strings.Contains(got, "restarting every rank") || !strings.Contains(got, "replacing it alone") {
		t.Errorf("rank 1 was not replaced alone:\n%s", got)
	}
	checkReplacedFinals(t, got, ranks, steps)
	went := torchShrinkWent.FindAllStringSubmatch(got, -1)
	if len(went) != 3 {
		t.Fatalf("%d survivors said they went on with the replacement, want 3:\n%s", len(went), got)
	}
	for _, w := range went {
		pid, _ := strconv.Atoi(w[1])
		if w[2] != w[4] || w[3] != "4" || w[5] != "4" || pid == ranks[1] || ranks[rankNumber(w[2])] != pid {
			t.Errorf("process %s went on as rank %s of %s from %s/%s; want a survivor keeping its rank in a world of 4", w[1], w[2], w[3], w[4], w[5])
		}
	}
	replaced := torchReplaced.FindAllStringSubmatch(got, -1)
	if len(replaced) != 1 || replaced[0][2] != "1" || replaced[0][3] != "4" {
		t.Fatalf("want one replacement's line as rank 1 of 4, got %q:\n%s", replaced, got)
	}
	if from, _ := strconv.Atoi(replaced[0][4]); from < 50 {
		t.Errorf("the replacement trained on from step %d, not from the survivors' (50 at least)", from)
	}
	t.Logf("the four ranks trained their first step together again within %s of the kill (the replacement's within %s)",
		slowestAfter(killed, append(went, replaced[0])), slowestAfter(killed, replaced))
}

// checkReplacedFinals checks the final lines of a torchshrink job of 4
// whose rank 1 was replaced: ranks 0, 2 and 3 end with their first
// processes (pids by rank in ranks), rank 1 with a new one, each rank of 4
// after every step, all with the same model.
func checkReplacedFinals(t *testing.T, got string, ranks map[int]int, steps int) {
	t.Helper()
	finals := torchShrinkFinal.FindAllStringSubmatch(got, -1)
	if len(finals) != 4 {
		t.Fatalf("%d final lines, want 4:\n%s", len(finals), got)
	}
	seen := map[int]bool{}
	for _, f := range finals {
		pid, _ := strconv.Atoi(f[1])
		r := rankNumber(f[2])
		seen[r] = true
		if f[3] != "4" || f[4] != strconv.Itoa(steps) {
			t.Errorf("rank %d (pid %d) ended in a world of %s after %s steps; want 4 after %d", r, pid, f[3], f[4], steps)
		}
		if first := ranks[r] == pid; first == (r == 1) {
			t.Errorf("rank %d ended with process %d (first processes %v): want its first process unless it is rank 1", r, pid, ranks)
		}
		if f[5] != finals[0][5] {
			t.Errorf("rank %d ended with model %s, rank %s with %s", r, f[5], finals[0][2], finals[0][5])
		}
	}
	if len(seen) != 4 {
		t.Errorf("final lines of ranks %v, want 0 to 3", seen)
	}
}

// rankNumber parses a rank a regexp matched as digits.
func rankNumber(s string) int {
	r, _ := strconv.Atoi(s)
	return r
}
