package yarntest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/task/resume"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

// TestSubmitElastic runs an elastic job (--num-executors 2:3,
// spindle.failure.policy elastic) on the test YARN, with the driver on the
// gateway (client mode: it asks the ResourceManager for the NodeManagers'
// and the queue's room) and in the ApplicationMaster (cluster mode: it
// goes by the headroom of the allocate answers). Its queue has room for
// the ApplicationMaster and two executors only: the job asks for three,
// gets none within spindle.failure.elasticWait, and starts with two. Once
// the queue's limit is lifted and every rank has finished a checkpoint,
// the job grows to three at that checkpoint. With the limit back, an
// executor's container killed makes it shrink to two. Every epoch still
// feeds each row exactly once (row-id checksums).
func TestSubmitElastic(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) { testElastic(t, mode) })
	}
}

func testElastic(t *testing.T, mode string) {
	const rows, epochs = 6000, 8
	s := startSite(t, yarntest.Config{NodeManagers: 3})
	// The AM's 256 MiB and two executors' 512 MiB (256m, the overhead and
	// the tensor feed's 128 MiB of shared memory): no room for a third.
	const twoExecutors = 256 + 2*512 + 100
	if err := s.yarn.SetQueueLimit("default", twoExecutors, 0); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	ids, err := rowsum.WriteIDs(data, rows)
	if err != nil {
		t.Fatal(err)
	}
	j := s.submit(t, "--name", "elastic", "--deploy-mode", mode, "--num-executors", "2:3", "--executor-memory", "256m",
		"--input", ids, "--label-column", "id", "--feed", "tensor", "--batch-rows", "10",
		"--epochs", fmt.Sprint(epochs), "--shuffle", "--seed", "4", "--checkpoint-dir", filepath.Join(data, "ckpt"),
		"--conf", "spindle.failure.policy=elastic", "--conf", "spindle.failure.elasticWait=2s",
		// Where the job grows or shrinks depends on timing: without even
		// batches each rank takes its share of an epoch's rest once.
		"--conf", "spindle.feed.evenBatches=off",
		"--", rowcheckBin, "--every", "5", "--pause", "5ms")
	waitOutput := func(what string) {
		t.Helper()
		j.until(t, 2*time.Minute, strconv.Quote(what), func() bool { return strings.Contains(j.stderr.String(), what) })
	}
	waitOutput("runs 2 of 3 executors")
	if err := s.yarn.SetQueueLimit("default", 0, 0); err != nil {
		t.Fatal(err)
	}
	waitOutput("growing from 2 toward 3 at the newest checkpoint")
	waitOutput("taken by 2 ranks) with 3 ranks")
	ct := runningExecutorOf(t, s, j, 3)
	// Kill once the three ranks have finished a checkpoint (rank 2 exists
	// in the world of three only).
	j.until(t, 2*time.Minute, "checkpoint by the world of three", func() bool { return checkpointedBy(filepath.Join(data, "ckpt"), 3) })
	// Room for two again, so that the job, once shrunk, stays so.
	if err := s.yarn.SetQueueLimit("default", twoExecutors, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.yarn.KillContainer(ct.ID); err != nil {
		t.Fatal(err)
	}
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("the elastic job failed: exit %d\n%s", code, j.stderr.String())
	}
	out := j.stderr.String()
	for _, want := range []string{"taken by 3 ranks) with 2 ranks", "exited with status 137"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := rowsum.Check(out, 2, epochs, rows); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

// checkpointedBy says whether the newest complete checkpoint in dir is
// one of a world of n, by the rules the driver resumes by
// (resume.Latest): every record names that world, one generation and one
// step. A checkpoint's records of lower ranks may be an earlier, smaller
// world's (it resumed from an older checkpoint and wrote this one again).
func checkpointedBy(dir string, n int) bool {
	p, _, err := resume.Latest(context.Background(), fsys.Local(), dir, 0, nil, time.Time{})
	return err == nil && p != nil && p.World == n
}

// runningExecutorOf waits until n executor containers of the newest
// generation (executor ids exec-R-gG) run and returns one.
func runningExecutorOf(t *testing.T, s *site, j *job, n int) yarntest.ContainerInfo {
	t.Helper()
	var found yarntest.ContainerInfo
	err := testutil.Poll(2*time.Minute, func() error {
		byGen := map[string][]yarntest.ContainerInfo{}
		newest := ""
		for _, ct := range s.yarn.Containers() {
			if ct.ExecutorID == "" || !ct.Running {
				continue
			}
			_, gen, _ := strings.Cut(ct.ExecutorID, "-g")
			byGen[gen] = append(byGen[gen], ct)
			if len(gen) > len(newest) || (len(gen) == len(newest) && gen > newest) {
				newest = gen
			}
		}
		if run := byGen[newest]; len(run) == n {
			found = run[len(run)-1]
			return nil
		}
		select {
		case code := <-j.done:
			t.Fatalf("the job ended (exit %d) before %d executors ran:\n%s", code, n, j.stderr.String())
		default:
		}
		return fmt.Errorf("no generation of %d executor containers running (the newest, %q, has %d)", n, newest, len(byGen[newest]))
	})
	if err != nil {
		t.Fatalf("%v:\n%s", err, j.stderr.String())
	}
	return found
}
