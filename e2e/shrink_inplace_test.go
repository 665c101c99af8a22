package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

var (
	shrinkWent  = regexp.MustCompile(`shrinkcheck went on pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+) step=(\d+) at_ms=(\d+)`)
	shrinkAt    = regexp.MustCompile(`shrinkcheck at pid=\d+ rank=\d+ world=(\d+) step=(\d+)`)
	shrinkFinal = regexp.MustCompile(`shrinkcheck final pid=(\d+) rank=(\d+) world=(\d+) steps=(\d+)`)
)

// TestElasticShrinksInPlace: an elastic job of 4 workers that allreduce
// every step, with spindle.failure.shrinkInPlace, loses rank 1's training
// process (SIGKILL) mid-run. The driver does not restart the gang: the
// three survivors keep their processes (same pids, no second start), get
// the smaller membership through their executors, re-form a world of 3
// renumbered in their old order, and the job ends with exit 0, each
// survivor ending in the world of 3 with every step trained.
func TestElasticShrinksInPlace(t *testing.T) {
	t.Parallel()
	const steps = 300
	cmd, out, ranks := startShrinking(t, steps)
	got, killed := goOnWithout(t, cmd, out, ranks[1])
	// Survivors in their old order: old ranks 0, 2, 3 are ranks 0, 1, 2.
	newRank := map[int]int{0: 0, 2: 1, 3: 2}
	finals := shrinkFinal.FindAllStringSubmatch(got, -1)
	if len(finals) != 3 {
		t.Fatalf("%d final lines, want 3 (the survivors):\n%s", len(finals), got)
	}
	for _, f := range finals {
		pid, _ := strconv.Atoi(f[1])
		old := slices.IndexFunc([]int{0, 1, 2, 3}, func(r int) bool { return ranks[r] == pid })
		if old < 0 || old == 1 {
			t.Errorf("final line of process %d, which is not a survivor's first process (pids %v)", pid, ranks)
			continue
		}
		if f[2] != strconv.Itoa(newRank[old]) || f[3] != "3" || f[4] != strconv.Itoa(steps) {
			t.Errorf("old rank %d (pid %d) ended as rank %s of %s after %s steps; want rank %d of 3 after %d", old, pid, f[2], f[3], f[4], newRank[old], steps)
		}
	}
	went := shrinkWent.FindAllStringSubmatch(got, -1)
	if len(went) != 3 {
		t.Fatalf("%d survivors said they went on in the smaller world, want 3:\n%s", len(went), got)
	}
	logWentOn(t, killed, went)
}

// goOnWithout SIGKILLs the training process pid of the job cmd runs,
// waits for the job and checks that it exited 0 with the other 3 ranks
// going on in place, no gang restarted; it returns the job's output and
// when the kill was.
func goOnWithout(t *testing.T, cmd *exec.Cmd, out *syncbuf.Buffer, pid int) (string, time.Time) {
	t.Helper()
	got, killed := killAndWait(t, cmd, out, pid)
	checkNotRestarted(t, got)
	return got, killed
}

// killAndWait SIGKILLs the training process pid of the job cmd runs,
// waits for the job and checks that it exited 0; it returns the job's
// output and when the kill was.
func killAndWait(t *testing.T, cmd *exec.Cmd, out *syncbuf.Buffer, pid int) (string, time.Time) {
	t.Helper()
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	got := out.String()
	if err != nil {
		t.Fatalf("the job failed: %v\n%s", err, got)
	}
	return got, killed
}

// logWentOn logs how soon after the kill the last survivor trained its
// first step in the smaller world: went are the survivors' "went on"
// lines, whose last group is that moment in Unix milliseconds.
func logWentOn(t *testing.T, killed time.Time, went [][]string) {
	t.Helper()
	t.Logf("the survivors trained their first step in the world of 3 within %s of the kill", slowestAfter(killed, went))
}

// slowestAfter is how long after killed the last of lines was: the last
// group of each is a moment in Unix milliseconds.
func slowestAfter(killed time.Time, lines [][]string) time.Duration {
	var slowest time.Duration
	for _, w := range lines {
		ms, _ := strconv.ParseInt(w[len(w)-1], 10, 64)
		slowest = max(slowest, time.UnixMilli(ms).Sub(killed))
	}
	return slowest.Round(time.Millisecond)
}

// checkNotRestarted checks that a job's output got says the 3 survivors
// of a world of 4 went on in place, and no generation restarted them.
func checkNotRestarted(t *testing.T, got string) {
	t.Helper()
	if strings.Contains(got, "restarting every rank") || strings.Contains(got, "generation 1") ||
		!strings.Contains(got, "the other 3 ranks go on without it in place") {
		t.Errorf("the gang was restarted rather than shrunk in place:\n%s", got)
	}
}

// startSubmit starts spindle with args in a temporary directory, its
// output in out; the test's end kills it.
func startSubmit(t *testing.T, args []string) (*exec.Cmd, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(spindleBin, args...)
	cmd.Dir, cmd.Env = t.TempDir(), testEnv()
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, out
}

// trainingPIDs waits, up to within, until n processes of the program name
// run under cmd, and returns their pids by SPINDLE_RANK.
func trainingPIDs(t *testing.T, cmd *exec.Cmd, name string, n int, within time.Duration) map[int]int {
	t.Helper()
	ranks := map[int]int{}
	testutil.WaitFor(t, within, testutil.Holds(fmt.Sprintf("the %d training processes", n), func() bool {
		for _, pid := range descendants(cmd.Process.Pid, name) {
			if r, ok := rankOf(pid); ok {
				ranks[r] = pid
			}
		}
		return len(ranks) == n
	}))
	return ranks
}

// TestElasticShrinksTwiceInPlace: an elastic job of 4 workers (MIN 2)
// with spindle.failure.shrinkInPlace loses rank 1's training process, and
// once the others went on in a world of 3, the executor of the process
// that started as rank 3 (rank 2 of 3 by then): the driver hears of that
// loss from the cluster manager, and the two left go on in a world of 2
// with their first processes; the job exits 0 without a restart.
func TestElasticShrinksTwiceInPlace(t *testing.T) {
	t.Parallel()
	const steps = 600
	cmd, out, ranks := startShrinking(t, steps)
	if err := syscall.Kill(ranks[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The driver takes a loss within 2 s of a shrink for survivors that
	// did not go on (replaceSettle): wait until the world of 3 trained
	// 150 steps (20 ms each at least) past where it went on.
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("the world of 3 to train 150 steps", func() bool {
		went := shrinkWent.FindAllStringSubmatch(out.String(), -1)
		if len(went) < 3 {
			return false
		}
		from, _ := strconv.Atoi(went[0][6])
		for _, m := range shrinkAt.FindAllStringSubmatch(out.String(), -1) {
			if at, _ := strconv.Atoi(m[2]); m[1] == "3" && at >= from+150 {
				return true
			}
		}
		return false
	}))
	executor := parentOf(t, ranks[3])
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", executor)); !strings.Contains(string(cmdline), "executor") {
		t.Fatalf("the parent %d of old rank 3's process %d is not its executor: %q", executor, ranks[3], cmdline)
	}
	if err := syscall.Kill(executor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	got := out.String()
	if err != nil {
		t.Fatalf("the job failed: %v\n%s", err, got)
	}
	if strings.Contains(got, "restarting every rank") || !strings.Contains(got, "the other 2 ranks go on without it in place") {
		t.Errorf("the gang did not shrink in place twice:\n%s", got)
	}
	finals := shrinkFinal.FindAllStringSubmatch(got, -1)
	want := map[string]string{strconv.Itoa(ranks[0]): "0", strconv.Itoa(ranks[2]): "1"}
	if len(finals) != 2 {
		t.Fatalf("%d final lines, want 2 (old ranks 0 and 2):\n%s", len(finals), got)
	}
	for _, f := range finals {
		if r, ok := want[f[1]]; !ok || f[2] != r || f[3] != "2" || f[4] != strconv.Itoa(steps) {
			t.Errorf("process %s ended as rank %s of %s after %s steps; want old ranks 0 and 2's first processes as ranks 0 and 1 of 2 after %d",
				f[1], f[2], f[3], f[4], steps)
		}
	}
}

// startShrinking starts an elastic job of 4 shrinkcheck workers (MIN 2)
// that trains steps and shrinks in place, and returns once the four
// joined their communicator, with their pids by rank.
func startShrinking(t *testing.T, steps int) (*exec.Cmd, *syncbuf.Buffer, map[int]int) {
	t.Helper()
	joined := regexp.MustCompile(`shrinkcheck joined`)
	return startShrinkingJob(t, "shrinkcheck", joined, shrinkcheckBin, "--steps", strconv.Itoa(steps), "--pause", "20ms")
}

// startShrinkingJob starts an elastic job of 4 workers (MIN 2) that
// shrinks in place and runs command, the program name, and returns once
// its output has four lines matching ready (one per rank), with the
// training processes' pids by rank.
func startShrinkingJob(t *testing.T, name string, ready *regexp.Regexp, command ...string) (*exec.Cmd, *syncbuf.Buffer, map[int]int) {
	t.Helper()
	args := submitArgs(append([]string{"--num-executors", "2:4", "--conf", "spindle.failure.policy=elastic",
		"--conf", "spindle.failure.shrinkInPlace=true", "--"}, command...)...)
	cmd, out := startSubmit(t, args)
	ranks := trainingPIDs(t, cmd, name, 4, 90*time.Second)
	testutil.WaitFor(t, 90*time.Second, testutil.Holds("every rank to train", func() bool {
		return len(ready.FindAllString(out.String(), -1)) >= 4
	}))
	return cmd, out, ranks
}
