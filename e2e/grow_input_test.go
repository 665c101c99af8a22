package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/rowsum"
)

var (
	rowshrinkGrew     = regexp.MustCompile(`rowshrink grew pid=(\d+) rank=(\d+) world=(\d+) epoch=(\d+) step=(\d+)`)
	rowshrinkNewcomer = regexp.MustCompile(`rowshrink newcomer pid=(\d+) rank=(\d+) world=(\d+) step=(\d+)`)
	rowshrinkFinal    = regexp.MustCompile(`rowshrink final pid=(\d+) rank=(\d+) world=(\d+) steps=(\d+)`)
)

// TestElasticGrowsBackInPlaceWithInput: the job of
// TestElasticShrinksInPlaceWithInput (4 workers reading row ids, even
// batches, rank 1 lost in epoch 1 having read batch 6, its rest dealt
// among the 3 that go on; 480,000 rows, so that an epoch outgrows the
// feed socket's buffer) with spindle.failure.growInPlace over 10 epochs.
// Once rank 1's local[4] slot is free, the driver starts a newcomer; it
// joins at the end of a later epoch, where every running feed holds: the
// 3 grow to a world of 4 before any batch of the next epoch (each says so
// with the same epoch and step), the newcomer takes their sums, and every
// feed reads the 4-rank plan from then on. The 3 keep their first
// processes, no rank restarts, the newcomer trains to the end in the
// world of 4, every row is trained exactly once in every epoch, and the
// job exits 0.
func TestElasticGrowsBackInPlaceWithInput(t *testing.T) {
	t.Parallel()
	const epochs, rows, crash = 10, 480000, 6
	input := writeIDColumns(t, rows, 12, 32, func(id, c int) int { return (id + c) % 97 })
	args := submitArgs("--num-executors", "2:4", "--input", input, "--label-column", "id", "--feed", "tensor",
		"--batch-rows", "1000", "--epochs", strconv.Itoa(epochs), "--shuffle", "--seed", "4",
		"--conf", "spindle.feed.shuffleBufferRows=4000", "--conf", "spindle.feed.prefetchBatches=2", "--conf", "spindle.failure.policy=elastic",
		"--conf", "spindle.failure.shrinkInPlace=true", "--conf", "spindle.failure.growInPlace=true", "--conf", "spindle.failure.elasticWait=1s",
		"--conf", "spindle.feed.evenBatches=pad", "--conf", "spindle.feed.sharedMemory=false",
		"--", rowshrinkBin, "--epochs", strconv.Itoa(epochs), "--crash-rank", "1", "--crash-epoch", "1",
		"--crash-batch", strconv.Itoa(crash), "--pause", "2ms", "--grow")
	ranks, got := runRowshrink(t, args)
	checkNotRestarted(t, got)
	if n := len(rowshrinkStarted.FindAllStringSubmatch(got, -1)); n != 5 {
		t.Errorf("%d start lines, want the 4 first processes and one newcomer:\n%s", n, got)
	}
	newcomer := rowshrinkNewcomer.FindAllStringSubmatch(got, -1)
	if len(newcomer) != 1 || newcomer[0][2] != "3" || newcomer[0][3] != "4" {
		t.Fatalf("newcomer lines %q, want one as rank 3 of 4:\n%s", newcomer, got)
	}
	grew := rowshrinkGrew.FindAllStringSubmatch(got, -1)
	if len(grew) != 3 {
		t.Fatalf("%d ranks said they grew, want the 3 that went on:\n%s", len(grew), got)
	}
	for _, g := range grew {
		if g[3] != "4" || g[4] != grew[0][4] || g[5] != newcomer[0][4] || g[4] == "1" {
			t.Errorf("grew line %q: want the 3 in a world of 4 from the same later epoch, at the newcomer's step %s", g[0], newcomer[0][4])
		}
	}
	t.Logf("the newcomer (pid %s) joined as rank 3 of 4 at the start of epoch %s, step %s", newcomer[0][1], grew[0][4], newcomer[0][4])
	// Old ranks 0, 2 and 3 went on as 0, 1 and 2; the newcomer is rank 3.
	want := map[string]string{strconv.Itoa(ranks[0]): "0", strconv.Itoa(ranks[2]): "1", strconv.Itoa(ranks[3]): "2", newcomer[0][1]: "3"}
	finals := rowshrinkFinal.FindAllStringSubmatch(got, -1)
	if len(finals) != 4 {
		t.Fatalf("%d final lines, want 4:\n%s", len(finals), got)
	}
	for _, f := range finals {
		if r, ok := want[f[1]]; !ok || f[2] != r || f[3] != "4" {
			t.Errorf("process %s ended as rank %s of %s; want the 3 first processes that went on and the newcomer as ranks 0 to 3 of 4", f[1], f[2], f[3])
		}
	}
	if !strings.Contains(got, "the running ranks grow to 4 in place") {
		t.Errorf("the console did not say the job grew in place:\n%s", got)
	}
	if _, err := rowsum.Check(got, 1, epochs, rows); err != nil {
		t.Errorf("%v\n%s", err, got)
	}
}
