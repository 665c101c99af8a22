package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

var logregFinal = regexp.MustCompile(`final rank=(\d) epochs=\d+ loss=\S+ accuracy=\S+ weights=([0-9a-f]+)`)

// TestRestartReplacesAnAllreducingWorker: under restart with
// spindle.failure.replaceWorkers, a logreg job of 4 ranks that allreduce
// every step loses rank 2's process mid-training. One new executor takes
// rank 2; the three survivors keep their processes, wait at the step that
// failed, rejoin the replacement in place and hand it their model and
// position; and every rank ends with the very weights of an undisturbed
// run of the same job (so every batch was trained once, in order).
func TestRestartReplacesAnAllreducingWorker(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 4000, 1)
	args := submitArgs("--num-executors", "4", "--input", filepath.Join(data, "*.parquet"), "--label-column", "label",
		"--feed", "tensor", "--batch-rows", "16", "--epochs", "12",
		"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.replaceWorkers=true", "--", logregBin)
	undisturbed := make(chan result, 1)
	go func() { undisturbed <- spindle(t, t.TempDir(), args...) }()

	cmd, out := startSubmit(t, args)
	testutil.WaitFor(t, 90*time.Second, testutil.Holds("every rank to finish an epoch", func() bool {
		return strings.Count(out.String(), "epoch 1:") >= 4
	}))
	ranks := trainingPIDs(t, cmd, "logreg", 4, 10*time.Second)
	if err := syscall.Kill(ranks[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("the replacement to join", func() bool {
		return strings.Contains(out.String(), "rank 2 replaced: joined at epoch")
	}))
	survivors := descendants(cmd.Process.Pid, "logreg")
	for _, r := range []int{0, 1, 3} {
		if !slices.Contains(survivors, ranks[r]) {
			t.Errorf("rank %d's process %d is gone after the replacement joined (running: %v)", r, ranks[r], survivors)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the job failed: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, r := range []int{0, 1, 3} {
		if !strings.Contains(got, fmt.Sprintf("rank %d rejoined a replaced rank", r)) {
			t.Errorf("rank %d did not rejoin the replacement in place:\n%s", r, got)
		}
	}
	if strings.Contains(got, "restarting every rank") || !strings.Contains(got, "replacing it alone") {
		t.Errorf("rank 2 was not replaced alone:\n%s", got)
	}
	base := <-undisturbed
	if base.code != 0 {
		t.Fatalf("the undisturbed run failed:\n%s", base)
	}
	want := logregFinal.FindStringSubmatch(base.stdout)
	finals := logregFinal.FindAllStringSubmatch(got, -1)
	if want == nil || len(finals) != 4 {
		t.Fatalf("%d final lines, want 4 (and one in the undisturbed run):\n%s", len(finals), got)
	}
	for _, f := range finals {
		if f[2] != want[2] {
			t.Errorf("rank %s ended with weights %s, the undisturbed run with %s", f[1], f[2], want[2])
		}
	}
}

// rankOf reads a training process's SPINDLE_RANK.
func rankOf(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return 0, false
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, "SPINDLE_RANK="); ok {
			var r int
			_, err := fmt.Sscan(v, &r)
			return r, err == nil
		}
	}
	return 0, false
}
