package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// The row-id job of TestAMKilledResumes: rows row ids over ranks ranks,
// epochs shuffled epochs.
const amRows, amRanks, amEpochs = 24000, 2, 4

// TestAMKilledResumes kills the ApplicationMaster (its driver) of a
// cluster-mode job on the real mini cluster at 60% of the time the same
// job took undisturbed, measured first in the same test, or halfway
// through its epochs if sooner. YARN's second
// attempt must resume from the newest complete checkpoint and its feed
// position (the ranks print where they resumed), and the job must end
// having fed the same rows as the undisturbed run: every epoch each row
// id exactly once. The times are printed, not asserted (docs/reliability.md
// holds them): the goal is at most the undisturbed time plus the time
// since the last checkpoint plus 30 s.
func TestAMKilledResumes(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	local, err := rowsum.WriteIDs(t.TempDir(), amRows)
	if err != nil {
		t.Fatal(err)
	}
	input := hc.Props["fs.defaultFS"] + "/data/am-restart/" + filepath.Base(local)
	put(t, hc, local, input)
	job := func(name, ckpt string) []string {
		return []string{"--deploy-mode", "cluster", "--name", name, "--conf", "spindle.yarn.maxAppAttempts=2",
			"--conf", "spindle.log.level=warn", "--conf", "spindle.failure.policy=restart",
			"--num-executors", fmt.Sprint(amRanks), "--executor-memory", "256m",
			"--input", input, "--label-column", "id", "--feed", "tensor", "--batch-rows", "40", "--shuffle", "--seed", "3",
			"--epochs", fmt.Sprint(amEpochs), "--checkpoint-dir", ckpt,
			"--", rowcheckBin, "--every", "10", "--pause", "15ms", "--crash-after", "0"}
	}

	begin := time.Now()
	code, stdout, stderr := submit(t, hc.ConfDir, 6*time.Minute, job("am-undisturbed", filepath.Join(t.TempDir(), "ckpt"))...)
	undisturbed := time.Since(begin)
	if code != 0 {
		t.Fatalf("undisturbed run: spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	rowsOnce(t, "undisturbed run", stdout)

	ckpt := filepath.Join(t.TempDir(), "ckpt")
	begin = time.Now()
	r := startOut(t, hc.ConfDir, job("am-killed", ckpt)...)
	app := r.waitFor(t, appRE, 2*time.Minute)[1]
	// At 60% of the undisturbed time, or once a rank has finished half
	// its epochs if that comes first (the load may fall between the runs:
	// a kill timed by the first alone once landed after the ranks ended),
	// and not before the ranks trained (a kill before the first checkpoint
	// would test nothing of resuming).
	halfway := fmt.Sprintf("generation=0 epoch=%d ", amEpochs/2-1)
	for !strings.Contains(r.stdout.String(), "rowcheck rank=1 pid=") ||
		(time.Since(begin) < undisturbed*6/10 && !strings.Contains(r.stdout.String(), halfway)) {
		select {
		case code := <-r.done:
			t.Fatalf("the job ended (exit %d) before the kill:\n%s", code, r.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	pid := amPID(t, app)
	killed := time.Now()
	last := newestUnder(ckpt)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the ApplicationMaster of %s (pid %d): %v", app, pid, err)
	}
	code = r.wait(t, 6*time.Minute)
	disturbed := time.Since(begin)
	out := r.stdout.String()
	if code != 0 {
		t.Fatalf("after the ApplicationMaster was killed: spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, out, r.stderr.String())
	}
	sinceCkpt := time.Duration(0)
	if !last.IsZero() {
		sinceCkpt = killed.Sub(last)
	}
	t.Logf("load %s; undisturbed %.1f s; AM killed at %.1f s (%.0f%%), %.2f s after the last checkpoint; disturbed %.1f s; goal at most %.1f s",
		loadAvg(), undisturbed.Seconds(), killed.Sub(begin).Seconds(), 100*killed.Sub(begin).Seconds()/undisturbed.Seconds(),
		sinceCkpt.Seconds(), disturbed.Seconds(), (undisturbed + sinceCkpt + 30*time.Second).Seconds())

	// The second attempt resumed the ranks from a checkpoint and the feed
	// from its position, not from the start.
	resumed := regexp.MustCompile(`rowcheck rank=\d+ resumed from \S+ step (\d+), feed at epoch (\d+) batch (\d+)`).FindAllStringSubmatch(out, -1)
	if len(resumed) != amRanks {
		t.Fatalf("%d ranks said where they resumed, want %d:\n%s", len(resumed), amRanks, out)
	}
	for _, m := range resumed {
		t.Logf("%s", m[0])
		if m[1] == "0" || (m[2] == "0" && m[3] == "0") {
			t.Errorf("a rank resumed at step %s, epoch %s batch %s: not from the feed position of the checkpoint", m[1], m[2], m[3])
		}
	}
	rowsOnce(t, "after the ApplicationMaster was killed", out)
}

// rowsOnce checks that every epoch of a run fed each row id exactly
// once over the last generation's ranks: two runs that pass fed the same
// rows.
func rowsOnce(t *testing.T, run, stdout string) {
	t.Helper()
	if n, err := rowsum.Check(stdout, amRanks, amEpochs, amRows); err != nil || n != amEpochs {
		t.Fatalf("%s: %d epochs checked: %v\n%s", run, n, err, stdout)
	}
}

// newestUnder returns the newest modification time of a file under dir,
// or zero if there is none.
func newestUnder(dir string) time.Time {
	var newest time.Time
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
		return nil
	})
	return newest
}

// loadAvg is the machine's load average over the last minute, for the
// figures a test prints.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// startOut is start with the gateway's stdout kept too.
func startOut(t *testing.T, confDir string, args ...string) *runningOut {
	t.Helper()
	out := &syncbuf.Buffer{}
	r := startWith(t, confDir, out, args...)
	return &runningOut{running: r, stdout: out}
}

// runningOut is a running spindle submit whose stdout is kept.
type runningOut struct {
	*running
	stdout *syncbuf.Buffer
}
