package e2e

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

var (
	torchShrinkAt    = regexp.MustCompile(`torchshrink at pid=\d+ rank=\d+ world=4 step=50\b`)
	torchShrinkWent  = regexp.MustCompile(`torchshrink went on pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+) step=(\d+) at_ms=(\d+)`)
	torchShrinkFinal = regexp.MustCompile(`torchshrink final pid=(\d+) rank=(\d+) world=(\d+) steps=(\d+) params_sha256=([0-9a-f]+)`)
)

// TestPyTorchShrinksInPlace: an elastic PyTorch job of 4 workers without
// input (e2e/torchshrink: a DistributedDataParallel module over gloo),
// with spindle.failure.shrinkInPlace, loses rank 1's training process
// (SIGKILL) once every rank trained 50 steps. The survivors catch gloo's
// error, spindle.torch.reform re-forms their process group in a world of
// 3 and catch_up hands them the furthest survivor's model: the driver
// restarts nothing, the three keep their processes, each trains every
// step and ends with the same model, and the job exits 0.
func TestPyTorchShrinksInPlace(t *testing.T) {
	t.Parallel()
	needTorch(t)
	const steps = 300
	script := filepath.Join(repoRoot, "e2e", "torchshrink", "train.py")
	cmd, out, ranks := startShrinkingJob(t, "torchshrink", torchShrinkAt,
		python, script, "--steps", strconv.Itoa(steps), "--pause", "0.02", "--ddp")
	got, killed := goOnWithout(t, cmd, out, ranks[1])
	// Survivors in their old order: old ranks 0, 2, 3 are ranks 0, 1, 2.
	newRank := map[int]int{0: 0, 2: 1, 3: 2}
	oldRank := func(pid string) int {
		p, _ := strconv.Atoi(pid)
		return slices.IndexFunc([]int{0, 1, 2, 3}, func(r int) bool { return ranks[r] == p })
	}
	finals := torchShrinkFinal.FindAllStringSubmatch(got, -1)
	if len(finals) != 3 {
		t.Fatalf("%d final lines, want 3 (the survivors):\n%s", len(finals), got)
	}
	for _, f := range finals {
		old := oldRank(f[1])
		if old < 0 || old == 1 {
			t.Errorf("final line of process %s, which is not a survivor's first process (pids %v)", f[1], ranks)
			continue
		}
		if f[2] != strconv.Itoa(newRank[old]) || f[3] != "3" || f[4] != strconv.Itoa(steps) {
			t.Errorf("old rank %d (pid %s) ended as rank %s of %s after %s steps; want rank %d of 3 after %d", old, f[1], f[2], f[3], f[4], newRank[old], steps)
		}
		if f[5] != finals[0][5] {
			t.Errorf("old rank %d ended with model %s, old rank %d with %s", old, f[5], oldRank(finals[0][1]), finals[0][5])
		}
	}
	went := torchShrinkWent.FindAllStringSubmatch(got, -1)
	if len(went) != 3 {
		t.Fatalf("%d survivors said they went on in the smaller world, want 3:\n%s", len(went), got)
	}
	for _, w := range went {
		if old := oldRank(w[1]); w[4] != strconv.Itoa(old) || w[5] != "4" || w[3] != "3" {
			t.Errorf("process %s went on as rank %s of %s from %s/%s; want old rank %d of 4 in a world of 3", w[1], w[2], w[3], w[4], w[5], old)
		}
	}
	logWentOn(t, killed, went)
}

var (
	torchGrew     = regexp.MustCompile(`torchshrink grew pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+) step=(\d+) at_ms=(\d+)`)
	torchNewcomer = regexp.MustCompile(`torchshrink replaced pid=(\d+) rank=(\d+) world=(\d+) step=(\d+)`)
)

// TestPyTorchGrowsBackInPlace: an elastic PyTorch job of 4 workers
// (e2e/torchshrink: a DistributedDataParallel module over gloo, calling
// spindle.torch.grow at every step boundary), with
// spindle.failure.shrinkInPlace and growInPlace, loses rank 1's training
// process (SIGKILL): the three others re-form their group as a world of
// 3, and once the local[4] slot is free again the driver starts a
// newcomer, which joins them as rank 3 at a step boundary and takes a
// survivor's model and step (catch_up). The three keep their first
// processes throughout, all four end in the world of 4 with every step
// trained and the same model, and the job exits 0 without a restart.
func TestPyTorchGrowsBackInPlace(t *testing.T) {
	t.Parallel()
	needTorch(t)
	const steps = 800
	script := filepath.Join(repoRoot, "e2e", "torchshrink", "train.py")
	args := submitArgs("--num-executors", "2:4", "--conf", "spindle.failure.policy=elastic",
		"--conf", "spindle.failure.shrinkInPlace=true", "--conf", "spindle.failure.growInPlace=true",
		"--conf", "spindle.failure.elasticWait=2s",
		"--", python, script, "--steps", strconv.Itoa(steps), "--pause", "0.02", "--ddp", "--grow")
	cmd, out, ranks := startFourRanks(t, args, "torchshrink", torchShrinkAt)
	got, _ := goOnWithout(t, cmd, out, ranks[1])

	finals := checkGrewBack(t, got, ranks, grewBack{newcomer: torchNewcomer, grew: torchGrew, final: torchShrinkFinal}, steps)
	for _, f := range finals {
		if f[5] != finals[0][5] {
			t.Errorf("process %s ended with model %s, process %s with %s", f[1], f[5], finals[0][1], finals[0][5])
		}
	}
}
