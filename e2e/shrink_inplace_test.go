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

// shrinkJoined is the line each shrinkcheck worker prints once it joined
// its communicator.
var shrinkJoined = regexp.MustCompile(`shrinkcheck joined`)

// startShrinking starts an elastic job of 4 shrinkcheck workers (MIN 2)
// that trains steps and shrinks in place, and returns once the four
// joined their communicator, with their pids by rank.
func startShrinking(t *testing.T, steps int) (*exec.Cmd, *syncbuf.Buffer, map[int]int) {
	t.Helper()
	return startShrinkingJob(t, "shrinkcheck", shrinkJoined, shrinkcheckBin, "--steps", strconv.Itoa(steps), "--pause", "20ms")
}

// startShrinkingJob starts an elastic job of 4 workers (MIN 2) that
// shrinks in place and runs command, the program name, and returns once
// its output has four lines matching ready (one per rank), with the
// training processes' pids by rank.
func startShrinkingJob(t *testing.T, name string, ready *regexp.Regexp, command ...string) (*exec.Cmd, *syncbuf.Buffer, map[int]int) {
	t.Helper()
	args := submitArgs(append([]string{"--num-executors", "2:4", "--conf", "spindle.failure.policy=elastic",
		"--conf", "spindle.failure.shrinkInPlace=true", "--"}, command...)...)
	return startFourRanks(t, args, name, ready)
}

// startFourRanks starts spindle with args, a job of 4 workers running the
// program name, and returns once its output has four lines matching ready
// (one per rank), with the training processes' pids by rank.
func startFourRanks(t *testing.T, args []string, name string, ready *regexp.Regexp) (*exec.Cmd, *syncbuf.Buffer, map[int]int) {
	t.Helper()
	cmd, out := startSubmit(t, args)
	ranks := trainingPIDs(t, cmd, name, 4, 90*time.Second)
	testutil.WaitFor(t, 90*time.Second, testutil.Holds("every rank to train", func() bool {
		return len(ready.FindAllString(out.String(), -1)) >= 4
	}))
	return cmd, out, ranks
}

var (
	shrinkGrew     = regexp.MustCompile(`shrinkcheck grew pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+) step=(\d+) at_ms=(\d+)`)
	shrinkNewcomer = regexp.MustCompile(`shrinkcheck newcomer pid=(\d+) rank=(\d+) world=(\d+) step=(\d+)`)
)

// TestElasticGrowsBackInPlace: an elastic job of 4 workers that allreduce
// every step, with spindle.failure.shrinkInPlace and growInPlace, loses
// rank 1's training process (SIGKILL): the three others go on as a world
// of 3, and once its local[4] slot is free again the driver starts a
// newcomer, which joins them as rank 3 at a step boundary and takes their
// step and state. The three keep their first processes and ranks 0 to 2
// throughout, all four end in the world of 4 with every step trained (the
// ones of each step sum to the world size), and the job exits 0 without a
// restart of any rank.
func TestElasticGrowsBackInPlace(t *testing.T) {
	t.Parallel()
	const steps = 1500
	args := submitArgs("--num-executors", "2:4", "--conf", "spindle.failure.policy=elastic",
		"--conf", "spindle.failure.shrinkInPlace=true", "--conf", "spindle.failure.growInPlace=true",
		"--conf", "spindle.failure.elasticWait=2s",
		"--", shrinkcheckBin, "--steps", strconv.Itoa(steps), "--pause", "20ms", "--grow")
	cmd, out, ranks := startFourRanks(t, args, "shrinkcheck", shrinkJoined)
	got, _ := goOnWithout(t, cmd, out, ranks[1])

	// Every process that joined a world: the 4 first ones and 1 newcomer.
	if n := strings.Count(got, "shrinkcheck joined"); n != 5 {
		t.Errorf("%d processes joined, want the 4 first ones and one newcomer:\n%s", n, got)
	}
	checkGrewBack(t, got, ranks, grewBack{newcomer: shrinkNewcomer, grew: shrinkGrew, final: shrinkFinal}, steps)
}

// grewBack is how a training program says it grew back in place: its
// newcomer's line (pid, rank, world, step), the grown ranks' (pid, rank,
// world, was rank/world), and every process's final one (pid, rank,
// world, steps, and with torchshrink the model's hash).
type grewBack struct{ newcomer, grew, final *regexp.Regexp }

// checkGrewBack checks the output of a job of 4 whose rank 1 (ranks are
// the first processes) was killed and that grew back to 4 in place: the
// console said so, one newcomer joined as rank 3 with the others' step,
// the three that went on grew keeping their ranks, and the survivors'
// first processes and the newcomer ended as ranks 0 to 3 of 4 after steps.
// It returns the final lines.
func checkGrewBack(t *testing.T, got string, ranks map[int]int, say grewBack, steps int) [][]string {
	t.Helper()
	if !strings.Contains(got, "joins the 3 running ranks in place") || !strings.Contains(got, "the running ranks grow to 4 in place") {
		t.Errorf("the console did not say the job grew in place:\n%s", got)
	}
	newcomer := say.newcomer.FindAllStringSubmatch(got, -1)
	if len(newcomer) != 1 || newcomer[0][2] != "3" || newcomer[0][3] != "4" || newcomer[0][4] == "0" {
		t.Fatalf("newcomer lines %q, want one as rank 3 of 4 that took the others' step:\n%s", newcomer, got)
	}
	t.Logf("the newcomer (pid %s) joined as rank 3 of 4 and took the others' step %s", newcomer[0][1], newcomer[0][4])
	grew := say.grew.FindAllStringSubmatch(got, -1)
	if len(grew) != 3 {
		t.Fatalf("%d ranks said they grew, want the 3 that went on:\n%s", len(grew), got)
	}
	for _, g := range grew {
		if g[3] != "4" || g[5] != "3" || g[2] != g[4] {
			t.Errorf("grew line %q: want a rank of 3 that kept its rank in the world of 4", g[0])
		}
	}
	// The survivors keep their processes; old ranks 0, 2 and 3 are ranks
	// 0, 1 and 2, and the newcomer rank 3.
	want := map[string]string{strconv.Itoa(ranks[0]): "0", strconv.Itoa(ranks[2]): "1", strconv.Itoa(ranks[3]): "2", newcomer[0][1]: "3"}
	finals := say.final.FindAllStringSubmatch(got, -1)
	if len(finals) != 4 {
		t.Fatalf("%d final lines, want 4:\n%s", len(finals), got)
	}
	var pids []string
	for _, f := range finals {
		pids = append(pids, f[1])
		if r, ok := want[f[1]]; !ok || f[2] != r || f[3] != "4" || f[4] != strconv.Itoa(steps) {
			t.Errorf("process %s ended as rank %s of %s after %s steps; want the survivors' first processes and the newcomer as ranks 0 to 3 of 4 after %d",
				f[1], f[2], f[3], f[4], steps)
		}
	}
	if slices.Contains(pids, strconv.Itoa(ranks[1])) {
		t.Errorf("the killed process %d ended", ranks[1])
	}
	return finals
}
