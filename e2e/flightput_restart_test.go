package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/task/resume"
)

// TestFlightPutRestart: a pushed job under the restart policy loses an
// executor mid-epoch: in its first epoch while producers are still
// pushing, or in its second after the input ended. The driver kept every
// batch it sent each rank (its journal), so the new generation's
// executors are sent their rank's rows again and resume from the
// checkpoint's feed position; rows pushed after the kill follow. Every
// epoch feeds each acknowledged row exactly once.
func TestFlightPutRestart(t *testing.T) {
	t.Parallel()
	const rows, epochs, perEpoch = 6000, 3, 300 // perEpoch: steps per rank
	for _, tc := range []struct {
		name    string
		before  int   // rows pushed before the kill; the rest after it
		afterAt int64 // kill once both ranks checkpointed past this step
		epoch   string
	}{
		{"epoch 0 while pushing", rows / 2, 0, "0"},
		{"epoch 1 after the end of input", rows, perEpoch, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ckpt := filepath.Join(dir, "ckpt")
			j := startPushJob(t, dir, "--num-executors", "2", "--label-column", "id", "--feed", "tensor", "--batch-rows", "10",
				"--shuffle", "--seed", "5", "--conf", "spindle.feed.shuffleBufferRows=100", "--epochs", strconv.Itoa(epochs),
				"--checkpoint-dir", ckpt, "--conf", "spindle.failure.policy=restart",
				"--conf", "spindle.flight.put.schema=id:int64,x:float64,label:float64",
				"--", rowcheckBin, "--every", "10", "--pause", "4ms", "--crash-after", "0")
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
			defer cancel()
			if err := goProducer(ctx, j.addr, j.token, 0, tc.before); err != nil {
				t.Fatal(err)
			}
			if tc.before == rows {
				if err := endInput(ctx, j.addr, j.token); err != nil {
					t.Fatal(err)
				}
			}
			pid := waitCheckpointed(t, j, ckpt, tc.afterAt)
			// The executor is the training process's parent.
			if err := syscall.Kill(parentOf(t, pid), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if tc.before < rows {
				if err := goProducer(ctx, j.addr, j.token, tc.before, rows-tc.before); err != nil {
					t.Fatal(err)
				}
				if err := endInput(ctx, j.addr, j.token); err != nil {
					t.Fatal(err)
				}
			}
			r := j.wait(t)
			if r.code != 0 {
				t.Fatalf("the restarted pushed job failed:\n%s", r)
			}
			if !strings.Contains(r.stderr, "restarting every rank") {
				t.Errorf("no restart after the executor was killed:\n%s", r)
			}
			resumed := regexp.MustCompile(`rowcheck rank=\d resumed from \S+ step \d+, feed at epoch `+tc.epoch+` batch [1-9]\d*`).FindAllString(r.stdout, -1)
			if len(resumed) != 2 {
				t.Errorf("%d ranks resumed mid-epoch %s from a checkpoint, want 2:\n%s", len(resumed), tc.epoch, r)
			}
			checkRowsOnce(t, r.stdout, 2, epochs, rows)
		})
	}
}

// waitCheckpointed waits until rank 1's training process of generation 0
// runs and both ranks completed a checkpoint past step after (its resume
// records written, as a restart looks for them: a checkpoint's files
// alone may be a save in progress), and returns that process's pid.
func waitCheckpointed(t *testing.T, j *pushJob, ckpt string, after int64) int {
	t.Helper()
	started := regexp.MustCompile(`rowcheck rank=1 pid=(\d+) generation=0`)
	var pid int
	testutil.WaitFor(t, time.Minute, testutil.Holds(fmt.Sprintf("rank 1 training and a checkpoint of both ranks past step %d", after), func() bool {
		m := started.FindStringSubmatch(j.stdout.String())
		if m == nil {
			return false
		}
		pid, _ = strconv.Atoi(m[1])
		parts, _ := filepath.Glob(filepath.Join(ckpt, "rows-*.rank-1"))
		for _, p := range parts {
			step, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "rows-"), ".rank-1"), 10, 64)
			if err == nil && step > after && resumable(ckpt, filepath.Base(strings.TrimSuffix(p, ".rank-1")), 2) {
				return true
			}
		}
		return false
	}))
	return pid
}

// resumable says whether checkpoint name in dir has the resume record of
// each of its world's ranks, which makes it one a restart resumes from.
func resumable(dir, name string, world int) bool {
	for rank := 0; rank < world; rank++ {
		if _, err := os.Stat(filepath.Join(dir, resume.Dir, name, fmt.Sprintf("rank-%d.json", rank))); err != nil {
			return false
		}
	}
	return true
}
