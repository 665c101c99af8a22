package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestLogisticRegressionJob is the README's job with 2 and 3 ranks: tensor
// feed, data-parallel logistic regression over Spindle's collectives.
// Every rank must learn the generated model and end with bit-identical
// weights.
func TestLogisticRegressionJob(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 20000, 4)
	for _, ranks := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d-ranks", ranks), func(t *testing.T) {
			r := spindle(t, data, submitArgs("--master", fmt.Sprintf("local[%d]", ranks), "--input", "*.parquet",
				"--label-column", "label", "--feed", "tensor", "--batch-rows", "128", "--epochs", "3",
				"--shuffle", "--seed", "3", "--", logregBin, "--lr", "0.5")...)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			finals := regexp.MustCompile(`\[rank (\d)\] final rank=\d epochs=3 loss=(\S+) accuracy=(\S+) weights=(\S+)`).FindAllStringSubmatch(r.stdout, -1)
			if len(finals) != ranks {
				t.Fatalf("want a final line from each of %d ranks:\n%s", ranks, r)
			}
			for _, f := range finals {
				if acc, _ := strconv.ParseFloat(f[3], 64); acc < 0.8 {
					t.Errorf("rank %s accuracy %.3f, want >= 0.8 (what the generating model allows is higher)", f[1], acc)
				}
				if f[4] != finals[0][4] {
					t.Errorf("rank %s ended with weights %s, rank %s with %s", f[1], f[4], finals[0][1], finals[0][4])
				}
			}
			if !strings.Contains(r.stderr, "succeeded") {
				t.Errorf("no success line:\n%s", r)
			}
		})
	}
}

// TestFeedsEveryRowOnce checks, for each input format and both socket
// feeds, that the ranks together see every row exactly once per epoch,
// with even batches off.
func TestFeedsEveryRowOnce(t *testing.T) {
	t.Parallel()
	const rows = 5000
	for _, format := range []string{"parquet", "arrow", "csv"} {
		data := generate(t, format, rows, 3)
		want := datasetSum(t, data)
		for _, mode := range []string{"arrow", "tensor"} {
			t.Run(format+"/"+mode, func(t *testing.T) {
				r := spindle(t, data, submitArgs("--num-executors", "3", "--input", filepath.Join(data, "part-*"), "--input-format", format,
					"--label-column", "label", "--feed", mode, "--batch-rows", "100", "--epochs", "2",
					"--conf", "spindle.feed.evenBatches=off", "--", feedcheckBin)...)
				if r.code != 0 {
					t.Fatalf("job failed:\n%s", r)
				}
				lines := parseFeedcheck(t, r.stdout)
				if len(lines) != 6 {
					t.Fatalf("want 3 ranks x 2 epochs of feedcheck lines, got %d:\n%s", len(lines), r)
				}
				for epoch := 0; epoch < 2; epoch++ {
					total, sum := 0, 0.0
					for _, l := range lines {
						if l.epoch == epoch {
							total += l.rows
							sum += l.sum
						}
					}
					if total != rows {
						t.Errorf("epoch %d: ranks saw %d rows, want %d", epoch, total, rows)
					}
					if diff := sum - want; diff > 0.05 || diff < -0.05 {
						t.Errorf("epoch %d: sum of f0 = %.4f, want %.4f", epoch, sum, want)
					}
				}
			})
		}
	}
}

// TestEvenBatchesAndShuffle: by default every rank gets the same number of
// batches; shuffling changes the order between epochs and is the same for
// the same seed.
func TestEvenBatchesAndShuffle(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 1001, 1)
	args := func(seed string) []string {
		return submitArgs("--num-executors", "2", "--input", data, "--label-column", "label",
			"--batch-rows", "64", "--epochs", "2", "--shuffle", "--seed", seed, "--", feedcheckBin)
	}
	r1 := spindle(t, data, args("11")...)
	r2 := spindle(t, data, args("11")...)
	r3 := spindle(t, data, args("12")...)
	for _, r := range []result{r1, r2, r3} {
		if r.code != 0 {
			t.Fatalf("job failed:\n%s", r)
		}
	}
	l1, l2, l3 := parseFeedcheck(t, r1.stdout), parseFeedcheck(t, r2.stdout), parseFeedcheck(t, r3.stdout)
	key := func(ls []epochLine) map[string]epochLine {
		m := map[string]epochLine{}
		for _, l := range ls {
			m[fmt.Sprintf("%d/%d", l.rank, l.epoch)] = l
		}
		return m
	}
	k1, k2, k3 := key(l1), key(l2), key(l3)
	if len(k1) != 4 {
		t.Fatalf("want 2 ranks x 2 epochs, got %v", l1)
	}
	// 1001 rows over 2 ranks: 501 and 500 rows, 8 batches each; both
	// already make 8 batches, so neither is padded.
	for k, l := range k1 {
		if l.batches != 8 || l.rows != 501-l.rank {
			t.Errorf("%s: %d batches, %d rows; want 8 batches of the rank's own %d rows", k, l.batches, l.rows, 501-l.rank)
		}
		if k2[k].order != l.order {
			t.Errorf("%s: same seed gave a different order", k)
		}
		if k3[k].order == l.order {
			t.Errorf("%s: another seed gave the same order", k)
		}
	}
	if k1["0/0"].order == k1["0/1"].order {
		t.Error("epochs 0 and 1 came in the same order")
	}
}

// TestRankOutputAndEnvironment: output reaches the submit terminal
// prefixed with the rank; the environment contract is filled in.
func TestRankOutputAndEnvironment(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	script := `echo "rank=$SPINDLE_RANK world=$SPINDLE_WORLD_SIZE local=$SPINDLE_LOCAL_RANK/$SPINDLE_LOCAL_WORLD_SIZE torch=$RANK/$WORLD_SIZE@$MASTER_ADDR:$MASTER_PORT job=$SPINDLE_JOB_ID mode=$SPINDLE_FEED_MODE peers=$SPINDLE_PEERS custom=$MY_VAR secret=${SPINDLE_JOB_SECRET:-none}"; echo "to stderr" >&2; echo "$TF_CONFIG"`
	r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--env", "MY_VAR=hello",
		"--", "/bin/sh", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	for rank := 0; rank < 2; rank++ {
		re := regexp.MustCompile(fmt.Sprintf(`\[rank %d\] rank=%d world=2 local=%d/2 torch=%d/2@127\.0\.0\.1:\d+ job=\S+ mode=arrow peers=127\.0\.0\.1:\d+,127\.0\.0\.1:\d+ custom=hello secret=none`, rank, rank, rank, rank))
		if !re.MatchString(r.stdout) {
			t.Errorf("rank %d's environment line missing or wrong:\n%s", rank, r)
		}
		if !strings.Contains(r.stderr, fmt.Sprintf("[rank %d] to stderr", rank)) {
			t.Errorf("rank %d's stderr not forwarded with its prefix", rank)
		}
	}
	if !strings.Contains(r.stdout, `[rank 1] {"cluster":{"chief":["127.0.0.1:`) || !strings.Contains(r.stdout, `"task":{"type":"worker","index":0}`) {
		t.Errorf("TF_CONFIG missing or wrong:\n%s", r.stdout)
	}
}

// TestDirectFeed: the process is told its splits in a JSON file.
func TestDirectFeed(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 3000, 3)
	r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--feed", "direct", "--", feedcheckBin)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	total := 0
	for _, m := range regexp.MustCompile(`direct splits=\d+ rows=(\d+) epochs=1`).FindAllStringSubmatch(r.stdout, -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	if total != 3000 {
		t.Fatalf("direct specs cover %d rows, want 3000:\n%s", total, r)
	}
}

// TestTrainingFailureFailsFast: one rank exits non-zero; the job stops the
// others, exits non-zero and names the rank, its status and its stderr.
func TestTrainingFailureFailsFast(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 2000, 2)
	pids := t.TempDir()
	r := spindle(t, data, submitArgs("--num-executors", "3", "--input", data, "--batch-rows", "10",
		"--epochs", "1000", "--", feedcheckBin, "--fail-rank", "1", "--fail-code", "7", "--batch-delay", "2ms", "--pid-dir", pids)...)
	if r.code != 1 {
		t.Fatalf("want exit status 1:\n%s", r)
	}
	for _, want := range []string{"rank 1 (host 127.0.0.1", "exited with status 7", "feedcheck: rank 1 failing on purpose"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, pid := range readPids(t, pids) {
		testutil.WaitFor(t, 5*time.Second, testutil.Holds(fmt.Sprintf("training process %d to be gone", pid), func() bool { return !alive(pid) }))
	}
}

// TestExecutorDeathNoticed: SIGKILL an executor process; the job fails
// within seconds naming it.
func TestExecutorDeathNoticed(t *testing.T) {
	t.Parallel()
	cmd, out, pids := startHangingJob(t)
	// The executor is the training process's parent.
	victim := parentOf(t, readPids(t, pids)[0])
	start := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if err == nil {
		t.Fatalf("job succeeded after an executor was killed:\n%s", out.String())
	}
	if took := time.Since(start); took > testutil.Scale(20*time.Second) {
		t.Errorf("executor death took %s to end the job", took)
	}
	if !regexp.MustCompile(`rank \d \(host 127\.0\.0\.1, executor exec-\d\) (exited|was lost)`).MatchString(out.String()) {
		t.Errorf("error does not name the lost executor:\n%s", out.String())
	}
	for _, pid := range readPids(t, pids) {
		testutil.WaitFor(t, 10*time.Second, testutil.Holds(fmt.Sprintf("training process %d to be gone", pid), func() bool { return !alive(pid) }))
	}
}

// TestInterruptStopsEverything: SIGINT on submit stops every child
// process and exits non-zero.
func TestInterruptStopsEverything(t *testing.T) {
	t.Parallel()
	cmd, out, pids := startHangingJob(t)
	executors := []int{}
	for _, pid := range readPids(t, pids) {
		executors = append(executors, parentOf(t, pid))
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if err == nil || !errorsAs(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("want exit status 130 after SIGINT, got %v:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "job interrupted") {
		t.Errorf("no interruption message:\n%s", out.String())
	}
	for _, pid := range append(readPids(t, pids), executors...) {
		if alive(pid) {
			t.Errorf("process %d still running after submit exited", pid)
		}
	}
}

// TestUnauthenticatedCallRefused: the driver's control plane refuses a
// caller without the job secret.
func TestUnauthenticatedCallRefused(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 200, 1)
	pids := t.TempDir()
	cmd := exec.Command(spindleBin, "submit", "--num-executors", "1", "--input", data, "--", feedcheckBin, "--hang", "--pid-dir", pids)
	cmd.Dir, cmd.Env = data, testEnv()
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	addrRE := regexp.MustCompile(`control plane listening".* addr=(\S+)`)
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("the driver's address", func() bool { return addrRE.MatchString(out.String()) }))
	addr := addrRE.FindStringSubmatch(out.String())[1]
	if err := callUnauthenticated(addr); err == nil {
		t.Fatal("the driver accepted a Register call without credentials")
	} else if !strings.Contains(err.Error(), "Unauthenticated") {
		t.Fatalf("want Unauthenticated, got %v", err)
	}
}

// startHangingJob submits a 2-rank job whose training processes read
// their feed and then wait to be killed, and returns once both run. pids
// is the directory where they wrote their pids.
func startHangingJob(t *testing.T) (cmd *exec.Cmd, out *strings.Builder, pids string) {
	t.Helper()
	data := generate(t, "parquet", 200, 1)
	pids = t.TempDir()
	cmd = exec.Command(spindleBin, submitArgs("--num-executors", "2", "--input", data, "--", feedcheckBin, "--hang", "--pid-dir", pids)...)
	cmd.Dir, cmd.Env = data, testEnv()
	out = &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("both training processes", func() bool { return len(readPids(t, pids)) == 2 }))
	return cmd, out, pids
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// TestFeedSharedMemoryKey: the feed offers shared memory by default, and
// spindle.feed.sharedMemory=false leaves the plain socket alone; the
// epochs are the same either way.
func TestFeedSharedMemoryKey(t *testing.T) {
	t.Parallel()
	const rows = 3000
	data := generate(t, "parquet", rows, 1)
	input := filepath.Join(data, "part-*")
	var sums []float64
	for _, on := range []bool{true, false} {
		r := spindle(t, data, submitArgs("--num-executors", "1", "--input", input, "--label-column", "label",
			"--batch-rows", "100", "--epochs", "2", "--conf", fmt.Sprintf("spindle.feed.sharedMemory=%t", on),
			"--", feedcheckBin)...)
		if r.code != 0 {
			t.Fatalf("job failed:\n%s", r)
		}
		if want := fmt.Sprintf("feedcheck rank=0 shared-memory=%t", on); !strings.Contains(r.stdout, want) {
			t.Fatalf("want %q in the output:\n%s", want, r)
		}
		lines := parseFeedcheck(t, r.stdout)
		if len(lines) != 2 || lines[0].rows != rows || lines[1].sum != lines[0].sum {
			t.Fatalf("want 2 epochs of %d rows each:\n%s", rows, r)
		}
		sums = append(sums, lines[0].sum)
	}
	if sums[0] != sums[1] {
		t.Errorf("epoch sums %v: shared memory changed the rows", sums)
	}
}

// TestLaterEpochsFromCache: the executor keeps the decoded batches of the
// first epoch, so later epochs need no input file. The training process
// deletes its input while the executor reads the first epoch (it has the
// file open); with the cache the job still gets every epoch whole,
// without it the second epoch fails naming the missing file.
func TestLaterEpochsFromCache(t *testing.T) {
	t.Parallel()
	const rows = 3000
	for _, cache := range []string{"64m", "0"} {
		t.Run("cache="+cache, func(t *testing.T) {
			data := generate(t, "parquet", rows, 1)
			input := filepath.Join(data, "part-*")
			r := spindle(t, data, submitArgs("--num-executors", "1", "--input", input, "--label-column", "label",
				"--batch-rows", "100", "--epochs", "3", "--conf", "spindle.feed.cacheMemory="+cache,
				"--", feedcheckBin, "-remove-inputs", input)...)
			if !strings.Contains(r.stdout, "feedcheck removed 1 input files") {
				t.Fatalf("the training process did not remove its input:\n%s", r)
			}
			if cache == "0" {
				if r.code == 0 || !strings.Contains(r.stderr, "part-") {
					t.Fatalf("without a cache the second epoch should fail naming the removed file:\n%s", r)
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			lines := parseFeedcheck(t, r.stdout)
			if len(lines) != 3 {
				t.Fatalf("want 3 epochs of feedcheck lines, got %d:\n%s", len(lines), r)
			}
			for _, l := range lines {
				if l.rows != rows || l.sum != lines[0].sum {
					t.Errorf("epoch %d: %d rows, sum %.4f; want %d rows, sum %.4f", l.epoch, l.rows, l.sum, rows, lines[0].sum)
				}
			}
		})
	}
}
