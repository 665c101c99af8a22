package yarntest_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

// TestSubmitSecondAttemptResumes: in cluster mode, an ApplicationMaster
// killed mid-job (its driver with it) is followed by YARN's second
// attempt, whose driver resumes from the newest checkpoint every rank
// finished, each rank's feed where that checkpoint left it: every epoch
// still feeds each row exactly once.
func TestSubmitSecondAttemptResumes(t *testing.T) {
	t.Parallel()
	const rows, epochs = 4000, 6
	s := startSite(t, yarntest.Config{NodeManagers: 3})
	data := t.TempDir()
	ids, err := rowsum.WriteIDs(data, rows)
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(data, "ckpt")
	j := s.submit(t, "--name", "second-attempt", "--deploy-mode", "cluster", "--num-executors", "2", "--executor-memory", "256m",
		"--input", ids, "--label-column", "id", "--feed", "tensor", "--batch-rows", "10",
		"--epochs", fmt.Sprint(epochs), "--shuffle", "--seed", "6", "--checkpoint-dir", ckpt,
		"--conf", "spindle.yarn.maxAppAttempts=2",
		"--", rowcheckBin, "--every", "5", "--pause", "5ms")
	runningExecutorOf(t, s, j, 2)
	if err := testutil.Poll(2*time.Minute, func() error {
		if !checkpointedBy(ckpt, 2) {
			return fmt.Errorf("no checkpoint in %s that both ranks recorded", ckpt)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v:\n%s", err, j.stderr.String())
	}
	am := ""
	for _, ct := range s.yarn.Containers() {
		if ct.AM && ct.Running {
			am = ct.ID
		}
	}
	if am == "" {
		t.Fatalf("no running ApplicationMaster: %+v", s.yarn.Containers())
	}
	if err := s.yarn.KillContainer(am); err != nil {
		t.Fatal(err)
	}
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("the second attempt failed: exit %d\n%s", code, j.stderr.String())
	}
	out := j.stderr.String()
	_, after, ok := strings.Cut(out, "the ApplicationMaster was lost")
	if !ok || !regexp.MustCompile(`resuming from checkpoint rows-\d+`).MatchString(after) {
		t.Errorf("the second attempt did not resume from a checkpoint:\n%s", out)
	}
	if _, err := rowsum.Check(out, 2, epochs, rows); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}
