package e2e

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

var (
	shrinkGrew     = regexp.MustCompile(`shrinkcheck grew pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+) step=(\d+) at_ms=(\d+)`)
	shrinkNewcomer = regexp.MustCompile(`shrinkcheck newcomer pid=(\d+) rank=(\d+) world=(\d+) step=(\d+)`)
)

// TestElasticGrowsBackInPlace: an elastic job of 4 workers that allreduce
// every step, with spindle.failure.shrinkInPlace and growInPlace, loses
// rank 1's training process (SIGKILL): the three others go on as a world
// of 3, and once its local[4] slot is free again the driver starts a
// newcomer, which joins them as rank 3 at a step boundary and takes their
// step and state. The three keep their first processes and ranks 0 to 2
// throughout, all four end in the world of 4 with every step trained (the
// ones of each step sum to the world size), and the job exits 0 without a
// restart of any rank.
func TestElasticGrowsBackInPlace(t *testing.T) {
	t.Parallel()
	const steps = 1500
	args := submitArgs("--num-executors", "2:4", "--conf", "spindle.failure.policy=elastic",
		"--conf", "spindle.failure.shrinkInPlace=true", "--conf", "spindle.failure.growInPlace=true",
		"--conf", "spindle.failure.elasticWait=2s",
		"--", shrinkcheckBin, "--steps", strconv.Itoa(steps), "--pause", "20ms", "--grow")
	cmd, out := startSubmit(t, args)
	ranks := trainingPIDs(t, cmd, "shrinkcheck", 4, 90*time.Second)
	testutil.WaitFor(t, 90*time.Second, testutil.Holds("every rank to join", func() bool {
		return strings.Count(out.String(), "shrinkcheck joined") >= 4
	}))
	got, _ := goOnWithout(t, cmd, out, ranks[1])

	// Every process that joined a world: the 4 first ones and 1 newcomer.
	if n := strings.Count(got, "shrinkcheck joined"); n != 5 {
		t.Errorf("%d processes joined, want the 4 first ones and one newcomer:\n%s", n, got)
	}
	checkGrewBack(t, got, ranks, grewBack{newcomer: shrinkNewcomer, grew: shrinkGrew, final: shrinkFinal}, steps)
}

// grewBack is how a training program says it grew back in place: its
// newcomer's line (pid, rank, world, step), the grown ranks' (pid, rank,
// world, was rank/world), and every process's final one (pid, rank,
// world, steps, and with torchshrink the model's hash).
type grewBack struct{ newcomer, grew, final *regexp.Regexp }

// checkGrewBack checks the output of a job of 4 whose rank 1 (ranks are
// the first processes) was killed and that grew back to 4 in place: the
// console said so, one newcomer joined as rank 3 with the others' step,
// the three that went on grew keeping their ranks, and the survivors'
// first processes and the newcomer ended as ranks 0 to 3 of 4 after steps.
// It returns the final lines.
func checkGrewBack(t *testing.T, got string, ranks map[int]int, say grewBack, steps int) [][]string {
	t.Helper()
	if !strings.Contains(got, "joins the 3 running ranks in place") || !strings.Contains(got, "the running ranks grow to 4 in place") {
		t.Errorf("the console did not say the job grew in place:\n%s", got)
	}
	newcomer := say.newcomer.FindAllStringSubmatch(got, -1)
	if len(newcomer) != 1 || newcomer[0][2] != "3" || newcomer[0][3] != "4" || newcomer[0][4] == "0" {
		t.Fatalf("newcomer lines %q, want one as rank 3 of 4 that took the others' step:\n%s", newcomer, got)
	}
	t.Logf("the newcomer (pid %s) joined as rank 3 of 4 and took the others' step %s", newcomer[0][1], newcomer[0][4])
	grew := say.grew.FindAllStringSubmatch(got, -1)
	if len(grew) != 3 {
		t.Fatalf("%d ranks said they grew, want the 3 that went on:\n%s", len(grew), got)
	}
	for _, g := range grew {
		if g[3] != "4" || g[5] != "3" || g[2] != g[4] {
			t.Errorf("grew line %q: want a rank of 3 that kept its rank in the world of 4", g[0])
		}
	}
	// The survivors keep their processes; old ranks 0, 2 and 3 are ranks
	// 0, 1 and 2, and the newcomer rank 3.
	want := map[string]string{strconv.Itoa(ranks[0]): "0", strconv.Itoa(ranks[2]): "1", strconv.Itoa(ranks[3]): "2", newcomer[0][1]: "3"}
	finals := say.final.FindAllStringSubmatch(got, -1)
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
	}
	if slices.Contains(pids, strconv.Itoa(ranks[1])) {
		t.Errorf("the killed process %d ended", ranks[1])
	}
	return finals
}
