package e2e

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

	if !strings.Contains(got, "joins the 3 running ranks in place") || !strings.Contains(got, "the running ranks grow to 4 in place") {
		t.Errorf("the console did not say the job grew in place:\n%s", got)
	}
	newcomer := torchNewcomer.FindAllStringSubmatch(got, -1)
	if len(newcomer) != 1 || newcomer[0][2] != "3" || newcomer[0][3] != "4" || newcomer[0][4] == "0" {
		t.Fatalf("newcomer lines %q, want one as rank 3 of 4 that took a survivor's step:\n%s", newcomer, got)
	}
	t.Logf("the newcomer (pid %s) joined as rank 3 of 4 at step %s", newcomer[0][1], newcomer[0][4])
	grew := torchGrew.FindAllStringSubmatch(got, -1)
	if len(grew) != 3 {
		t.Fatalf("%d ranks said they grew, want the 3 that went on:\n%s", len(grew), got)
	}
	for _, g := range grew {
		if g[3] != "4" || g[5] != "3" || g[2] != g[4] {
			t.Errorf("grew line %q: want a rank of 3 that kept its rank in the world of 4", g[0])
		}
	}
	// Old ranks 0, 2 and 3 are ranks 0, 1 and 2; the newcomer rank 3.
	want := map[string]string{strconv.Itoa(ranks[0]): "0", strconv.Itoa(ranks[2]): "1", strconv.Itoa(ranks[3]): "2", newcomer[0][1]: "3"}
	finals := torchShrinkFinal.FindAllStringSubmatch(got, -1)
	if len(finals) != 4 {
		t.Fatalf("%d final lines, want 4:\n%s", len(finals), got)
	}
	var pids []string
	for _, f := range finals {
		pids = append(pids, f[1])
		if r, ok := want[f[1]]; !ok || f[2] != r || f[3] != "4" || f[4] != strconv.Itoa(steps) {
			t.Errorf("process %s ended as rank %s of %s after %s steps; want the survivors' first processes and the newcomer as ranks 0 to 3 of 4 after %d",
				f[1], f[2], f[3], f[4], steps)
		}
		if f[5] != finals[0][5] {
			t.Errorf("process %s ended with model %s, process %s with %s", f[1], f[5], finals[0][1], finals[0][5])
		}
	}
	if slices.Contains(pids, strconv.Itoa(ranks[1])) {
		t.Errorf("the killed process %d ended", ranks[1])
	}
}
