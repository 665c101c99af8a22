package e2e

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

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
	cmd, out := startSubmit(t, args)
	ranks := trainingPIDs(t, cmd, "torchshrink", 4, 90*time.Second)
	testutil.WaitFor(t, 90*time.Second, testutil.Holds("every rank to train", func() bool {
		return len(torchShrinkAt.FindAllString(out.String(), -1)) >= 4
	}))
	got, _ := goOnWithout(t, cmd, out, ranks[1])

	finals := checkGrewBack(t, got, ranks, grewBack{newcomer: torchNewcomer, grew: torchGrew, final: torchShrinkFinal}, steps)
	for _, f := range finals {
		if f[5] != finals[0][5] {
			t.Errorf("process %s ended with model %s, process %s with %s", f[1], f[5], finals[0][1], finals[0][5])
		}
	}
}
