package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/rowsum"
)

// writeRowIDs writes rows rows with ids 0..rows-1 (column id) and a
// feature over files CSV files, and returns their glob.
func writeRowIDs(t *testing.T, rows, files int) string {
	t.Helper()
	return writeIDColumns(t, rows, files, 1, func(id, _ int) int { return id % 7 }, "x")
}

// writeIDColumns writes rows rows with ids 0..rows-1 in column id and
// features columns more, feature c of row id holding value(id, c), over
// files CSV files, and returns their glob. names, when given, names the
// features (else f0, f1, ...).
func writeIDColumns(t *testing.T, rows, files, features int, value func(id, c int) int, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	per := rows / files
	for f := range files {
		var b strings.Builder
		b.WriteString("id")
		for c := range features {
			if c < len(names) {
				fmt.Fprintf(&b, ",%s", names[c])
			} else {
				fmt.Fprintf(&b, ",f%d", c)
			}
		}
		b.WriteString("\n")
		for id := f * per; id < (f+1)*per; id++ {
			fmt.Fprintf(&b, "%d", id)
			for c := range features {
				fmt.Fprintf(&b, ",%d", value(id, c))
			}
			b.WriteString("\n")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.csv", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "*.csv")
}

// checkRowsOnce checks that rowcheck's (or its Python twin's) final lines
// say every epoch took each of rows row ids exactly once over all ranks
// (rowsum.Check).
func checkRowsOnce(t *testing.T, stdout string, ranks, epochs, rows int) {
	t.Helper()
	if _, err := rowsum.Check(stdout, ranks, epochs, rows); err != nil {
		t.Errorf("%v\n%s", err, stdout)
	}
}

// checkResumedMidEpoch checks that both ranks of a 60-batch-per-epoch job
// resumed from the same checkpoint, every 7 steps, with a feed position
// that is that checkpoint's step (epoch*60 + batch), and that the driver
// said so. at matches the position's epoch and batch in the process's line.
func checkResumedMidEpoch(t *testing.T, r result, at string) {
	t.Helper()
	re := regexp.MustCompile(`rowcheck rank=(\d) resumed from rows-(\d+) step (\d+), ` + at)
	ms := re.FindAllStringSubmatch(r.stdout, -1)
	if len(ms) != 2 {
		t.Fatalf("%d ranks said they resumed, want 2:\n%s", len(ms), r)
	}
	for _, m := range ms {
		name, step, epoch, batch := m[2], m[3], m[4], m[5]
		s, _ := strconv.Atoi(step)
		e, _ := strconv.Atoi(epoch)
		b, _ := strconv.Atoi(batch)
		if name != step || s%7 != 0 || s != e*60+b || name != ms[0][2] {
			t.Errorf("rank %s resumed from rows-%s step %s at epoch %s batch %s: want the same checkpoint on both ranks, its step's position", m[1], name, step, epoch, batch)
		}
	}
	if !strings.Contains(r.stderr, "resuming from checkpoint rows-"+ms[0][2]) {
		t.Errorf("the driver did not announce checkpoint rows-%s:\n%s", ms[0][2], r)
	}
}

// TestRestartResumesTheFeedMidEpoch: a rank SIGKILLs itself in the middle
// of an epoch; the restarted gang resumes from the newest checkpoint every
// rank finished saving, each rank's feed continuing that epoch where the
// checkpoint was taken, with the same shuffle: over the generations every
// epoch feeds each row exactly once.
func TestRestartResumesTheFeedMidEpoch(t *testing.T) {
	t.Parallel()
	const rows, epochs = 1200, 3
	input := writeRowIDs(t, rows, 3)
	for _, tt := range []struct {
		name  string
		feed  string
		extra []string
	}{
		{"shuffled", "tensor", []string{"--shuffle", "--seed", "11", "--conf", "spindle.feed.shuffleBufferRows=100"}},
		{"in order", "tensor", nil},
		// The process reads its splits itself and says where it stands
		// (task.Env.SetFeedPosition).
		{"direct", "direct", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := submitArgs(append([]string{"--num-executors", "2", "--input", input, "--label-column", "id", "--feed", tt.feed,
				"--batch-rows", "10", "--epochs", strconv.Itoa(epochs), "--checkpoint-dir", filepath.Join(dir, "ckpt"),
				"--conf", "spindle.failure.policy=restart"}, tt.extra...)...)
			// 60 batches per rank per epoch: the kill lands in epoch 1.
			r := spindle(t, dir, append(args, "--", rowcheckBin, "--crash-after", "83", "--every", "7", "--pause", "1ms")...)
			if r.code != 0 {
				t.Fatalf("the restarted job failed:\n%s", r)
			}
			checkResumedMidEpoch(t, r, `feed at epoch (\d+) batch (\d+)`)
			checkRowsOnce(t, r.stdout, 2, epochs, rows)
		})
	}
}

// pyRowcheck is rowcheck in Python, with spindle.Checkpointer: it keeps a
// checksum of the row ids it took per epoch, checkpoints it every 7 steps
// (each rank its own file), and rank 1 SIGKILLs itself in generation 0
// after 83 batches, once a checkpoint both ranks recorded exists (a slow
// rank 0 may not have saved one yet; the restart would then start over).
const pyRowcheck = `
import json, os, signal, time
import spindle

def both_recorded():
    root = os.path.join(os.environ["SPINDLE_CHECKPOINT_DIR"], ".spindle-resume")
    names = os.listdir(root) if os.path.isdir(root) else []
    return any(all(os.path.exists(os.path.join(root, n, "rank-%d.json" % r)) for r in (0, 1)) for n in names)

M = (1 << 64) - 1
def splitmix(x):
    x = (x + 0x9e3779b97f4a7c15) & M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
    return x ^ (x >> 31)

rank, gen = spindle.rank(), spindle.generation()
ck = spindle.Checkpointer(prefix="rows", every_steps=7, per_rank=True)
rows, hashes, step = {}, {}, 0
got = ck.resume()
if got is not None:
    step, data = got
    st = json.loads(data)
    rows = {int(k): v for k, v in st["rows"].items()}
    hashes = {int(k): v for k, v in st["hash"].items()}
    print("rowcheck rank=%d resumed from %s step %d, feed at %s" % (rank, spindle.resume_checkpoint()[0], step, spindle.feed_start()), flush=True)
taken = 0
for ep in spindle.feed().epochs(kind="batches"):
    for b in ep:
        for i in b["id"]:
            rows[ep.epoch] = rows.get(ep.epoch, 0) + 1
            hashes[ep.epoch] = (hashes.get(ep.epoch, 0) + splitmix(int(i))) & M
        time.sleep(0.001)
        step += 1
        taken += 1
        if gen == 0 and rank == 1 and taken == 83:
            deadline = time.monotonic() + 300
            while not both_recorded() and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)
        ck.maybe_save(step, lambda: json.dumps({"rows": rows, "hash": hashes}).encode())
for e in sorted(rows):
    print("rowcheck rank=%d generation=%d epoch=%d rows=%d hash=%016x" % (rank, gen, e, rows[e], hashes[e]), flush=True)
`

// TestPythonRestartResumesTheFeedMidEpoch is the same with a Python
// training process, fed over the socket and reading its splits itself
// (direct mode).
func TestPythonRestartResumesTheFeedMidEpoch(t *testing.T) {
	t.Parallel()
	const rows, epochs = 1200, 3
	input := writeRowIDs(t, rows, 3)
	for _, mode := range []string{"arrow", "direct"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			r := spindle(t, dir, submitArgs("--num-executors", "2", "--input", input, "--label-column", "id", "--feed", mode,
				"--batch-rows", "10", "--epochs", strconv.Itoa(epochs), "--checkpoint-dir", filepath.Join(dir, "ckpt"),
				"--shuffle", "--seed", "5", "--conf", "spindle.feed.shuffleBufferRows=64",
				"--conf", "spindle.failure.policy=restart", "--", python, "-c", pyRowcheck)...)
			if r.code != 0 {
				t.Fatalf("the restarted job failed:\n%s", r)
			}
			checkResumedMidEpoch(t, r, `feed at \((\d+), (\d+)\)`)
			checkRowsOnce(t, r.stdout, 2, epochs, rows)
		})
	}
}

// TestElasticShrinksAndRedealsTheEpoch: an elastic job of 3 workers (at
// least 2) loses one mid-epoch; it goes on with 2, from the newest
// checkpoint all 3 finished, the rest of that epoch dealt between the 2
// from where each of the 3 stood, later epochs planned for 2: every epoch
// feeds each row exactly once.
func TestElasticShrinksAndRedealsTheEpoch(t *testing.T) {
	t.Parallel()
	const rows, epochs = 1200, 3
	input := writeRowIDs(t, rows, 3)
	dir := t.TempDir()
	// 40 batches per rank per epoch; checkpoints every 6 steps: the last
	// complete one before the kill (step 54, or one before it if a rank
	// lagged) leaves an even number of batches per rank in its epoch, so
	// the rest splits into whole batches between 2 ranks (no padding).
	r := spindle(t, dir, submitArgs("--num-executors", "2:3", "--input", input, "--label-column", "id", "--feed", "tensor",
		"--batch-rows", "10", "--epochs", strconv.Itoa(epochs), "--checkpoint-dir", filepath.Join(dir, "ckpt"),
		"--shuffle", "--seed", "4", "--conf", "spindle.feed.shuffleBufferRows=50", "--conf", "spindle.failure.policy=elastic",
		"--", rowcheckBin, "--crash-after", "57", "--every", "6", "--pause", "3ms")...)
	if r.code != 0 {
		t.Fatalf("the elastic job failed:\n%s", r)
	}
	if !strings.Contains(r.stderr, "generation 1 runs 2 of 3 executors") ||
		!regexp.MustCompile(`resuming from checkpoint rows-\d+ \(step \d+, taken by 3 ranks\) with 2 ranks; the \d+ rows left in the epoch are dealt among them`).MatchString(r.stderr) {
		t.Errorf("the job did not go on with 2 ranks, the rest of the epoch dealt between them:\n%s", r)
	}
	checkRowsOnce(t, r.stdout, 2, epochs, rows)

	r = spindle(t, dir, submitArgs("--num-executors", "3:2", "--conf", "spindle.failure.policy=elastic", "--", "/bin/true")...)
	if r.code != 2 || !strings.Contains(r.stderr, "want 1 <= MIN <= MAX") {
		t.Errorf("MIN above MAX: want exit 2 naming it:\n%s", r)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--num-executors", "1:2"}, "needs spindle.failure.policy elastic"},
		{[]string{"--conf", "spindle.failure.shrinkInPlace=true", "--conf", "spindle.failure.policy=restart"}, "spindle.failure.shrinkInPlace needs spindle.failure.policy elastic"},
		{[]string{"--num-executors", "a:2", "--conf", "spindle.failure.policy=elastic"}, `--num-executors: spindle.failure.minExecutors: "a" is not an integer`},
		{[]string{"--num-executors", "1:2", "--conf", "spindle.failure.policy=elastic", "--num-ps", "1"}, "runs workers only"},
		{[]string{"--conf", "spindle.driver.advertisePort=5000"}, "needs a fixed spindle.driver.port"},
	} {
		r = spindle(t, dir, submitArgs(append(bad.args, "--", "/bin/true")...)...)
		if r.code != 2 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("%v: want exit 2 saying %q:\n%s", bad.args, bad.want, r)
		}
	}
}
