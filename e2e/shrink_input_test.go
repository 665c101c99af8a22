package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/internal/testutil"
)

var (
	rowshrinkStarted = regexp.MustCompile(`rowshrink started pid=(\d+) rank=(\d+) world=(\d+) generation=(\d+)`)
	rowshrinkWent    = regexp.MustCompile(`rowshrink went on pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+) epoch=(\d+) batches=(\d+)`)
)

// TestElasticShrinksInPlaceWithInput: an elastic job of 4 workers with
// spindle.failure.shrinkInPlace reads row ids (480,000 rows of 33
// columns, 120 batches of 1,000 a rank an epoch, 16 MB as float32,
// shuffled; over the socket alone, whose buffer, 4 MB asked and 8 MB as
// Linux doubles it, then holds half an epoch, so that the feeds are still
// in the epoch the loss comes in however far ahead of a starved process
// they run: with 240,000 rows the buffer held a whole epoch, and at load
// 90 every feed had ended epoch 1 before the loss) and allreduces every
// step what its batch adds to the world's row checksums. Rank 1's process SIGKILLs itself in epoch
// 1 having read batch 6 and before training it. The 3 survivors keep
// their processes (one start line each, no second generation), re-form a
// world of 3 and report that the world completed 6 batches of epoch 1;
// the driver deals rank 1's rows from batch 6 on (114,000 rows, 38
// batches each) to their running feeds before their epoch ends, and plans epoch 2
// for 3. The rows the world trained, summed by allreduce, hold every row
// exactly once per epoch: rank 1's batch 6, read but not trained, is
// trained once, by a survivor. Without the deal the survivors' feeds wait
// at the epoch's end and the job does not end.
func TestElasticShrinksInPlaceWithInput(t *testing.T) {
	t.Parallel()
	shrinkInPlaceWithInput(t, shrinkInput{rows: 480000, even: "pad", crash: 6, socketOnly: true})
}

// TestElasticShrinksInPlaceWithSharedMemory is the same with the default
// feed (shared memory on) and a data set small enough (48,000 rows: 12
// batches a rank an epoch) that each rank's whole epoch fits the shared
// memory: every feed has sent its epoch long before its process trained
// it. Rank 1 reads the rest of epoch 1 ahead from batch 6, to its end or
// for 2 s, before it kills itself. A feed asks the driver whether its
// epoch ends only once its process asked beyond the last batch, so the
// epoch is still open when rank 1 is lost: its 6 batches left are dealt
// 2 to each survivor in epoch 1, and the gang is not restarted. (When the
// feeds asked as their rows ran out, the driver had ended epoch 1 before
// the kill, and the gang restarted smaller.)
func TestElasticShrinksInPlaceWithSharedMemory(t *testing.T) {
	t.Parallel()
	shrinkInPlaceWithInput(t, shrinkInput{rows: 48000, even: "pad", crash: 6, readAhead: true})
}

// TestElasticShrinksInPlaceWithUnevenInput is the same with even batches
// off and rank 1 lost having read batch 7: its 113 batches left are dealt
// unpadded, 38, 38 and 37, so one survivor's feed ends a step before the
// others' and e2e/rowshrink joins their last step with no rows. A trainer
// that exited at its feed's end instead would leave the others waiting
// in that step.
func TestElasticShrinksInPlaceWithUnevenInput(t *testing.T) {
	t.Parallel()
	shrinkInPlaceWithInput(t, shrinkInput{rows: 480000, even: "off", crash: 7, socketOnly: true})
}

// shrinkInput is a run of the job of TestElasticShrinksInPlaceWithInput:
// rows row ids, spindle.feed.evenBatches even, rank 1 lost having read
// batch crash of epoch 1 (and, with readAhead, the rest of the epoch),
// over the socket alone or with shared memory (the default).
type shrinkInput struct {
	rows, crash           int
	even                  string
	socketOnly, readAhead bool
}

// shrinkInPlaceWithInput runs the job of TestElasticShrinksInPlaceWithInput
// as j says.
func shrinkInPlaceWithInput(t *testing.T, j shrinkInput) {
	const epochs = 3
	rows, crash := j.rows, j.crash
	input := writeIDColumns(t, rows, 12, 32, func(id, c int) int { return (id + c) % 97 })
	args := submitArgs("--num-executors", "2:4", "--input", input, "--label-column", "id", "--feed", "tensor",
		"--batch-rows", "1000", "--epochs", strconv.Itoa(epochs), "--shuffle", "--seed", "4",
		"--conf", "spindle.feed.shuffleBufferRows=4000", "--conf", "spindle.feed.prefetchBatches=2", "--conf", "spindle.failure.policy=elastic",
		"--conf", "spindle.failure.shrinkInPlace=true", "--conf", "spindle.feed.evenBatches="+j.even)
	if j.socketOnly {
		args = append(args, "--conf", "spindle.feed.sharedMemory=false")
	}
	args = append(args, "--", rowshrinkBin, "--epochs", strconv.Itoa(epochs), "--crash-rank", "1", "--crash-epoch", "1",
		"--crash-batch", strconv.Itoa(crash), "--pause", "2ms")
	if j.readAhead {
		args = append(args, "--crash-read-ahead")
	}
	ranks, got := runRowshrink(t, args)
	checkNotRestarted(t, got)
	dealt := fmt.Sprintf("the %d rows rank 1 had left of epoch 1 (from batch %d) are dealt among the 3 ranks that went on", (rows/4000-crash)*1000, crash)
	if !strings.Contains(got, dealt) {
		t.Errorf("the driver did not say %q:\n%s", dealt, got)
	}
	started := rowshrinkStarted.FindAllStringSubmatch(got, -1)
	if len(started) != 4 {
		t.Errorf("%d start lines, want 4 (no process started again):\n%s", len(started), got)
	}
	// Survivors in their old order: old ranks 0, 2, 3 are ranks 0, 1, 2.
	newRank := map[int]string{ranks[0]: "0", ranks[2]: "1", ranks[3]: "2"}
	went := rowshrinkWent.FindAllStringSubmatch(got, -1)
	if len(went) != 3 {
		t.Fatalf("%d survivors said they went on in the smaller world, want 3:\n%s", len(went), got)
	}
	for _, w := range went {
		pid, _ := strconv.Atoi(w[1])
		if r, ok := newRank[pid]; !ok || w[2] != r || w[3] != "3" || w[6] != "1" || w[7] != strconv.Itoa(crash) {
			t.Errorf("process %d went on as rank %s of %s at epoch %s batch %s; want a survivor's first process (pids %v), renumbered, at epoch 1 batch %d",
				pid, w[2], w[3], w[6], w[7], ranks, crash)
		}
	}
	if _, err := rowsum.Check(got, 1, epochs, rows); err != nil {
		t.Errorf("%v\n%s", err, got)
	}
}

// runRowshrink runs the job of args, 4 workers of e2e/rowshrink, to its
// end within 3 minutes; it returns the first processes' pids by rank and
// the job's output, failing t when the job failed.
func runRowshrink(t *testing.T, args []string) (map[int]int, string) {
	t.Helper()
	cmd, out := startSubmit(t, args)
	ranks := trainingPIDs(t, cmd, "rowshrink", 4, 90*time.Second)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(testutil.Scale(3 * time.Minute)):
		t.Fatalf("the job did not end within 3 minutes:\n%s", out.String())
	}
	got := out.String()
	if err != nil {
		t.Fatalf("the job failed: %v\n%s", err, got)
	}
	return ranks, got
}

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
