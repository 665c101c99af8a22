package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestFlightPutRestart: a pushed job under the restart policy loses an
// executor in the middle of its first epoch, while producers are still
// pushing. The driver kept every batch it sent each rank (its journal),
// so the new generation's executors are sent their rank's rows again and
// resume from the checkpoint's feed position; the rows pushed after the
// kill follow. Every epoch feeds each acknowledged row exactly once.
func TestFlightPutRestart(t *testing.T) {
	t.Parallel()
	const rows, epochs = 6000, 3
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	j := startPushJob(t, dir, "--num-executors", "2", "--label-column", "id", "--feed", "tensor", "--batch-rows", "10",
		"--shuffle", "--seed", "5", "--conf", "spindle.feed.shuffleBufferRows=100", "--epochs", strconv.Itoa(epochs), "--checkpoint-dir", ckpt,
		"--conf", "spindle.failure.policy=restart", "--conf", "spindle.flight.put.schema=id:int64,x:float64,label:float64",
		"--", rowcheckBin, "--every", "10", "--pause", "2ms", "--crash-after", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The first half, acknowledged; epoch 0 then waits for the rest.
	if err := goProducer(ctx, j.addr, j.token, 0, rows/2); err != nil {
		t.Fatal(err)
	}
	started := regexp.MustCompile(`rowcheck rank=1 pid=(\d+) generation=0`)
	var pid int
	testutil.WaitFor(t, time.Minute, testutil.Holds("rank 1 training and a checkpoint of both ranks", func() bool {
		m := started.FindStringSubmatch(j.stdout.String())
		if m != nil {
			pid, _ = strconv.Atoi(m[1])
		}
		parts, _ := filepath.Glob(filepath.Join(ckpt, "rows-*.rank-1"))
		for _, p := range parts {
			if _, err := os.Stat(strings.TrimSuffix(p, "1") + "0"); err == nil {
				return m != nil
			}
		}
		return false
	}))
	// The executor is the training process's parent.
	if err := syscall.Kill(parentOf(t, pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := goProducer(ctx, j.addr, j.token, rows/2, rows/2); err != nil {
		t.Fatal(err)
	}
	if err := endInput(ctx, j.addr, j.token); err != nil {
		t.Fatal(err)
	}
	r := j.wait(t)
	if r.code != 0 {
		t.Fatalf("the restarted pushed job failed:\n%s", r)
	}
	if !strings.Contains(r.stderr, "restarting every rank") {
		t.Errorf("no restart after the executor was killed:\n%s", r)
	}
	resumed := regexp.MustCompile(`rowcheck rank=\d resumed from \S+ step \d+, feed at epoch 0 batch [1-9]\d*`).FindAllString(r.stdout, -1)
	if len(resumed) != 2 {
		t.Errorf("%d ranks resumed mid-epoch 0 from a checkpoint, want 2:\n%s", len(resumed), r)
	}
	checkRowsOnce(t, r.stdout, 2, epochs, rows)
}
