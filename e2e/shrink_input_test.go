package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/rowsum"
)

var (
	rowshrinkStarted = regexp.MustCompile(`rowshrink started pid=(\d+) rank=(\d+) world=(\d+) generation=(\d+)`)
	rowshrinkWent    = regexp.MustCompile(`rowshrink went on pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+) epoch=(\d+) batches=(\d+)`)
)

// TestElasticShrinksInPlaceWithInput: an elastic job of 4 workers with
// spindle.failure.shrinkInPlace reads row ids (240,000 rows of 33
// columns, 60 batches of 1,000 a rank an epoch, shuffled; over the socket
// alone, whose 4 MB buffer then holds about half an epoch, so that the
// feeds are still in the epoch the loss comes in) and allreduces every step what its batch adds
// to the world's row checksums. Rank 1's process SIGKILLs itself in epoch
// 1 having read batch 6 and before training it. The 3 survivors keep
// their processes (one start line each, no second generation), re-form a
// world of 3 and report that the world completed 6 batches of epoch 1;
// the driver deals rank 1's rows from batch 6 on (54,000 rows, 18
// batches each) to their running feeds before their epoch ends, and plans epoch 2
// for 3. The rows the world trained, summed by allreduce, hold every row
// exactly once per epoch: rank 1's batch 6, read but not trained, is
// trained once, by a survivor. Without the deal the survivors' feeds wait
// at the epoch's end and the job does not end.
func TestElasticShrinksInPlaceWithInput(t *testing.T) {
	t.Parallel()
	const rows, epochs = 240000, 3
	input := writeIDColumns(t, rows, 12, 32, func(id, c int) int { return (id + c) % 97 })
	args := submitArgs("--num-executors", "2:4", "--input", input, "--label-column", "id", "--feed", "tensor",
		"--batch-rows", "1000", "--epochs", strconv.Itoa(epochs), "--shuffle", "--seed", "4",
		"--conf", "spindle.feed.shuffleBufferRows=4000", "--conf", "spindle.feed.prefetchBatches=2", "--conf", "spindle.feed.sharedMemory=false", "--conf", "spindle.failure.policy=elastic",
		"--conf", "spindle.failure.shrinkInPlace=true",
		"--", rowshrinkBin, "--epochs", strconv.Itoa(epochs), "--crash-rank", "1", "--crash-epoch", "1", "--crash-batch", "6", "--pause", "2ms")
	cmd, out := startSubmit(t, args)
	ranks := trainingPIDs(t, cmd, "rowshrink", 4, 90*time.Second)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the job did not end within 3 minutes:\n%s", out.String())
	}
	got := out.String()
	if err != nil {
		t.Fatalf("the job failed: %v\n%s", err, got)
	}
	checkNotRestarted(t, got)
	if !strings.Contains(got, "the 54000 rows rank 1 had left of epoch 1 (from batch 6) are dealt among the 3 ranks that went on") {
		t.Errorf("the driver did not say it dealt rank 1's rest of epoch 1 from batch 6:\n%s", got)
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
		if r, ok := newRank[pid]; !ok || w[2] != r || w[3] != "3" || w[6] != "1" || w[7] != "6" {
			t.Errorf("process %d went on as rank %s of %s at epoch %s batch %s; want a survivor's first process (pids %v), renumbered, at epoch 1 batch 6",
				pid, w[2], w[3], w[6], w[7], ranks)
		}
	}
	if _, err := rowsum.Check(got, 1, epochs, rows); err != nil {
		t.Errorf("%v\n%s", err, got)
	}
}
