package yarntest_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

var startedLine = regexp.MustCompile(`rowcheck rank=(\d+) pid=\d+ generation=(\d+) replacement=(\d+) started`)

// TestSubmitReplacesOneWorker: on YARN, under the restart policy with
// spindle.failure.replaceWorkers, an executor's container killed behind
// YARN's back is replaced by one new container at its rank while the
// other ranks keep running; every epoch still feeds each row once.
func TestSubmitReplacesOneWorker(t *testing.T) {
	t.Parallel()
	const rows, epochs = 4500, 6
	s := startSite(t, yarntest.Config{NodeManagers: 3})
	data := t.TempDir()
	ids, err := rowsum.WriteIDs(data, rows)
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(data, "ckpt")
	j := s.submit(t, "--name", "replace-one", "--num-executors", "3", "--executor-memory", "256m",
		"--input", ids, "--label-column", "id", "--feed", "tensor", "--batch-rows", "10",
		"--epochs", fmt.Sprint(epochs), "--shuffle", "--seed", "6", "--checkpoint-dir", ckpt,
		"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.replaceWorkers=true",
		"--", rowcheckBin, "--every", "5", "--pause", "5ms")
	victim := runningExecutorOf(t, s, j, 3)
	j.until(t, 2*time.Minute, "complete checkpoint", func() bool { return checkpointedBy(ckpt, 3) })
	if err := s.yarn.KillContainer(victim.ID); err != nil {
		t.Fatal(err)
	}
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("the job failed: exit %d\n%s", code, j.stderr.String())
	}
	out := j.stderr.String()
	if !strings.Contains(out, "replacing it alone") || strings.Contains(out, "restarting every rank") {
		t.Errorf("the lost worker was not replaced alone:\n%s", out)
	}
	starts := map[string]int{}
	replaced := 0
	for _, m := range startedLine.FindAllStringSubmatch(out, -1) {
		starts[m[1]]++
		if m[2] == "0" && m[3] == "1" {
			replaced++
		}
	}
	// The killed executor's own output may die with it (YARN executors
	// forward output in their heartbeats): its process's first line may
	// be missing, never a survivor's.
	total := starts["0"] + starts["1"] + starts["2"]
	if replaced != 1 || len(starts) != 3 || total < 3 || total > 4 {
		t.Errorf("processes started per rank %v, %d replacements: want one replacement and the other ranks once", starts, replaced)
	}
	if _, err := rowsum.Check(out, 3, epochs, rows); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}
