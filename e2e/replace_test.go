package e2e

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

var startedLine = regexp.MustCompile(`rowcheck rank=(\d+) pid=(\d+) generation=(\d+) replacement=(\d+) started`)

// TestRestartReplacesOneWorker: under the restart policy with
// spindle.failure.replaceWorkers, a rank of four that SIGKILLs itself
// mid-epoch is replaced alone: the other three keep their processes
// (one start each), the replacement resumes from the newest complete
// checkpoint with its feed where that checkpoint left the rank, and every
// epoch still feeds each row exactly once.
func TestRestartReplacesOneWorker(t *testing.T) {
	t.Parallel()
	const rows, epochs = 2400, 3
	input := writeRowIDs(t, rows, 4)
	dir := t.TempDir()
	// 60 batches per rank per epoch: the kill lands in epoch 1.
	r := spindle(t, dir, submitArgs("--num-executors", "4", "--input", input, "--label-column", "id", "--feed", "tensor",
		"--batch-rows", "10", "--epochs", "3", "--shuffle", "--seed", "5", "--checkpoint-dir", filepath.Join(dir, "ckpt"),
		"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.replaceWorkers=true",
		"--", rowcheckBin, "--crash-rank", "2", "--crash-after", "83", "--every", "7", "--pause", "1ms")...)
	if r.code != 0 {
		t.Fatalf("the job failed:\n%s", r)
	}
	starts := map[string][]string{}
	for _, m := range startedLine.FindAllStringSubmatch(r.stdout, -1) {
		starts[m[1]] = append(starts[m[1]], m[2]+" generation "+m[3]+" replacement "+m[4])
	}
	for _, rank := range []string{"0", "1", "3"} {
		if len(starts[rank]) != 1 {
			t.Errorf("rank %d started %d processes (%v), want 1: it should have kept running", rank[0]-'0', len(starts[rank]), starts[rank])
		}
	}
	if got := starts["2"]; len(got) != 2 || !strings.HasSuffix(got[1], "generation 0 replacement 1") {
		t.Errorf("rank 2 started %v, want its first process and one replacement in generation 0", got)
	}
	if !strings.Contains(r.stderr, "replacing it alone (restart 1 of 3) while the other ranks keep running") ||
		strings.Contains(r.stderr, "restarting every rank") {
		t.Errorf("the replacement was not announced, or every rank restarted:\n%s", r)
	}
	// The kill lands in epoch 1, but under load the newest checkpoint
	// every rank finished recording can still be one of epoch 0.
	m := regexp.MustCompile(`rowcheck rank=2 resumed from (rows-\d+) step (\d+), feed at epoch (\d+) batch`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("the replacement did not resume from a checkpoint:\n%s", r)
	}
	if !strings.Contains(r.stderr, "rank 2's replacement resumes from checkpoint "+m[1]+" (step "+m[2]+"); feed: rank 2 at epoch "+m[3]) {
		t.Errorf("the driver did not say where the replacement resumes:\n%s", r)
	}
	checkRowsOnce(t, r.stdout, 4, epochs, rows)
}

// TestReplacementKeepsItsCheckpointWhileOthersPrune: the lost rank ran
// ahead of the others and recorded checkpoints they had not reached, and
// its replacement is slow to load the checkpoint it was handed; the ranks
// that keep running complete the newer ones meanwhile, whose pruning
// (spindle.checkpoint.keep 3) would delete the replacement's. The driver
// pins it for the replacement: every epoch still feeds each row once.
func TestReplacementKeepsItsCheckpointWhileOthersPrune(t *testing.T) {
	t.Parallel()
	const rows, epochs, every = 1800, 3, 5
	input := writeRowIDs(t, rows, 3)
	dir := t.TempDir()
	// 60 batches per rank per epoch; rank 2 takes its 83 at 4 ms each
	// (0.3 s), the others 20 ms.
	r := spindle(t, dir, submitArgs("--num-executors", "3", "--input", input, "--label-column", "id", "--feed", "tensor",
		"--batch-rows", "10", "--epochs", strconv.Itoa(epochs), "--shuffle", "--seed", "7", "--checkpoint-dir", filepath.Join(dir, "ckpt"),
		"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.replaceWorkers=true", "--conf", "spindle.checkpoint.keep=3",
		"--", rowcheckBin, "--crash-rank", "2", "--crash-after", "83", "--crash-rank-pause", "4ms", "--every", strconv.Itoa(every),
		"--pause", "20ms", "--replacement-delay", testutil.Scale(3*time.Second).String())...)
	if r.code != 0 {
		t.Fatalf("the job failed:\n%s", r)
	}
	checkRowsOnce(t, r.stdout, 3, epochs, rows)
	m := regexp.MustCompile(`rowcheck rank=2 loaded (rows-\d+) with (\d+) newer complete checkpoints`).FindStringSubmatch(r.stdout)
	if m == nil {
		if !t.Failed() {
			t.Skipf("inconclusive: no checkpoint was complete when the replacement registered (the others were too slow), so it had none to load:\n%s", r)
		}
		t.Fatalf("the replacement did not load a checkpoint:\n%s", r)
	}
	if n, _ := strconv.Atoi(m[2]); n < 3 && !t.Failed() {
		t.Skipf("inconclusive: only %d checkpoints newer than %s were complete when the replacement loaded it, too few for pruning to take it", n, m[1])
	}
}

// replaceFallback fails rank 1 and rank 0 of generation 0 at once: a
// survivor failing while the lost rank is replaced, as the peers of a
// lost rank in a gloo or NCCL group do.
const replaceFallback = `echo "rank $SPINDLE_RANK generation $SPINDLE_GENERATION replacement $SPINDLE_REPLACEMENT"
if [ "$SPINDLE_GENERATION" = 0 ] && [ "$SPINDLE_REPLACEMENT" = 0 ]; then exit 3; fi`

// TestReplacementFallsBackToRestartingEveryRank: when the other ranks do
// not keep running while one is replaced, every rank is restarted, and
// the job's log says why.
func TestReplacementFallsBackToRestartingEveryRank(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := spindle(t, dir, submitArgs("--num-executors", "2", "--conf", "spindle.failure.policy=restart",
		"--conf", "spindle.failure.replaceWorkers=true", "--", "/bin/sh", "-c", replaceFallback)...)
	if r.code != 0 {
		t.Fatalf("the job failed:\n%s", r)
	}
	for _, want := range []string{"was being replaced alone: the other ranks did not keep running, so every rank restarts", "restarting every rank"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r)
		}
	}
	for _, want := range []string{"rank 0 generation 1 replacement 0", "rank 1 generation 1 replacement 0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r)
		}
	}
}
