package e2e

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
)

var sparseLRLine = regexp.MustCompile(`sparse-lr: auc (\S+) \(known model (\S+)\), logloss \S+, (\d+) keys on (\d+) servers, (\d+) pushes applied`)

// Spindle's own parameter server (--num-ps without --ps-command) trains
// the sparse example to within 0.01 AUC of the model that made its data,
// on 2 workers and 2 servers, under BSP and SSP; every acknowledged push
// was applied, and the servers are stopped when the workers end.
func TestBuiltinPSTrainsSparseLR(t *testing.T) {
	for _, staleness := range []string{"bsp", "2"} {
		t.Run("staleness="+staleness, func(t *testing.T) {
			dir := t.TempDir()
			events := filepath.Join(dir, "events")
			os.Mkdir(events, 0o755)
			r := spindle(t, dir, submitArgs("--master", "local[2]", "--num-ps", "2",
				"--conf", "spindle.eventLog.dir="+events, "--conf", "spindle.eventLog.flushInterval=200ms",
				"--conf", "spindle.ps.staleness="+staleness, "--", sparseLRBin, "--rows", testbin.SparseLRRows, "--hot", testbin.SparseLRHot,
				"--export", filepath.Join(dir, "weights.parquet"))...)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			m := sparseLRResult(t, r, "")
			// 2 workers' steps, each push acknowledged by both servers.
			if pushes, _ := strconv.Atoi(m[5]); pushes != 2*testbin.SparseLRSteps*2 {
				t.Errorf("servers applied %d pushes, want the %d acknowledged", pushes, 2*testbin.SparseLRSteps*2)
			}
			if want := "sparse-lr: exported " + m[3] + " rows of table weights to " + filepath.Join(dir, "weights.parquet"); !strings.Contains(r.stdout, want) {
				t.Errorf("no line saying %q:\n%s", want, r)
			}
			if fi, err := os.Stat(filepath.Join(dir, "weights.parquet")); err != nil || fi.Size() == 0 {
				t.Errorf("exported file: %v", err)
			}
			// The servers reported their totals (the web UI, the event log
			// and the spindle_ps_* metrics show them).
			if !eventLogHas(t, events, psReport) {
				t.Errorf("the event log holds no parameter-server report of its keys")
			}
			if n := serversRunning(t); n != 0 {
				t.Errorf("%d parameter servers outlived the job", n)
			}
		})
	}
}

// A job restarted after a worker's death (spindle.failure.policy restart)
// resumes from the tables' latest checkpoint: the new servers load it,
// the workers go on from its step, and the model ends as good as one
// trained without the failure.
func TestBuiltinPSRestartsFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	r := spindle(t, dir, submitArgs("--master", "local[2]", "--num-ps", "2",
		"--checkpoint-dir", filepath.Join(dir, "ckpt"),
		"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=1",
		"--", sparseLRBin, "--rows", testbin.SparseLRRows, "--hot", testbin.SparseLRHot, "--checkpoint-every", "20", "--die-at-step", "50")...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	for _, w := range []string{"0", "1"} {
		if want := "sparse-lr: worker " + w + " resumes at step 40 from the tables' checkpoint"; !strings.Contains(r.stdout, want) {
			t.Errorf("no line saying %q:\n%s", want, r)
		}
	}
	m := sparseLRResult(t, r, "after the restart, ")
	// Generation 1 applied only the steps after the checkpoint at step
	// 40: 2 workers × 40 steps × 2 servers.
	if pushes, _ := strconv.Atoi(m[5]); pushes != 2*(testbin.SparseLRSteps-40)*2 {
		t.Errorf("servers applied %d pushes after the restart, want %d", pushes, 2*(testbin.SparseLRSteps-40)*2)
	}

	// After the job, its tables' latest checkpoint exports to Parquet,
	// every key once (the backups' copies left out).
	out := filepath.Join(dir, "model")
	e := spindle(t, dir, "ps", "export", "--out", out, filepath.Join(dir, "ckpt", "ps"))
	if e.code != 0 {
		t.Fatalf("spindle ps export failed:\n%s", e)
	}
	line := regexp.MustCompile(`weights: (\d+) rows of dim 1 \(clock (\d+)\) -> `).FindStringSubmatch(e.stdout)
	if line == nil {
		t.Fatalf("spindle ps export did not report table weights:\n%s", e)
	}
	if rows, _ := strconv.Atoi(line[1]); rows < 1000 {
		t.Errorf("exported %s rows of table weights; the job touched far more keys", line[1])
	}
	if _, err := os.Stat(filepath.Join(out, "weights.parquet")); err != nil {
		t.Errorf("no exported file: %v", err)
	}
}

// sparseLRResult finds worker 0's result line and checks the trained AUC
// is within 0.01 of the known model's (when names the moment checked).
func sparseLRResult(t *testing.T, r result, when string) []string {
	t.Helper()
	m := sparseLRLine.FindStringSubmatch(r.stdout + r.stderr)
	if m == nil {
		t.Fatalf("no result line:\n%s", r)
	}
	trained, _ := strconv.ParseFloat(m[1], 64)
	known, _ := strconv.ParseFloat(m[2], 64)
	if math.Abs(trained-known) > 0.01 {
		t.Errorf("%strained AUC %.4f is not within 0.01 of the known model's %.4f", when, trained, known)
	}
	return m
}

// A worker that dies under BSP does not leave the others waiting for its
// clock: the job fails, naming it.
func TestBuiltinPSWorkerDies(t *testing.T) {
	r := spindle(t, t.TempDir(), submitArgs("--master", "local[2]", "--num-ps", "1",
		"--", sparseLRBin, "--rows", "100000", "--die-at-step", "5")...)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (the job failed):\n%s", r.code, r)
	}
	if !strings.Contains(r.stderr, "worker 1 (rank 1") || !strings.Contains(r.stderr, "status 3") {
		t.Fatalf("the failure does not name worker 1 and its status:\n%s", r)
	}
}

// serversRunning counts the processes running this test's spindle binary
// as a parameter server.
func serversRunning(t *testing.T) int {
	t.Helper()
	return len(serverPids())
}

// psReport is a parameter server's report of a nonzero key count.
var psReport = regexp.MustCompile(`"ps_keys":[1-9]`)

// eventLogHas says whether a file of the event log in dir matches re.
func eventLogHas(t *testing.T, dir string, re *regexp.Regexp) bool {
	t.Helper()
	found := false
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil && re.Match(b) {
				found = true
			}
		}
		return nil
	})
	return found
}

// A parameter server killed (SIGKILL) in the middle of training: with a
// backup of every row (spindle.ps.replicas 1, the default), its keys move
// to their backups, the job goes on, and the driver says what happened
// and starts a replacement, which rejoins the ring with the dead one's
// rows. With the spare so restored, a second server's death is survived
// too, and the job ends as well trained as without the kills. The second
// kill waits for the replacement to say it rejoined: the others copy it
// its rows until then (at load 50 that took over the 2 s this test once
// slept, and a kill inside it failed the job).
func TestBuiltinPSServerKilled(t *testing.T) {
	type kill struct {
		pid  int
		note string
	}
	kills := make(chan kill, 2)
	var stderr syncbuf.Buffer
	go func() {
		defer close(kills)
		var first []int
		for budget := testutil.NewBudget(90 * time.Second); !budget.Spent(); {
			pids := serverPids()
			switch {
			case first == nil && len(pids) == 3:
				time.Sleep(3 * time.Second) // well into training
				if syscall.Kill(pids[1], syscall.SIGKILL) != nil {
					return
				}
				first = pids
				kills <- kill{pids[1], "server 1"}
			case first != nil && len(pids) == 3 && !slices.Equal(pids, first) && strings.Contains(stderr.String(), "rejoined the ring"):
				// The replacement has rejoined: the job has its spare
				// back and survives another death.
				if syscall.Kill(first[2], syscall.SIGKILL) == nil {
					kills <- kill{first[2], "server 2, after server 1's replacement rejoined"}
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// Paced by sleeps (80 steps of at least 250 ms, stretched on a busy
	// machine) rather than by 500,000 rows of work, which cost 26 CPU-s.
	r := spindleWatched(t, t.TempDir(), nil, &stderr, submitArgs("--master", "local[2]", "--num-ps", "3",
		"--", sparseLRBin, "--rows", testbin.SparseLRRows, "--hot", testbin.SparseLRHot,
		"--pause", testutil.Scale(250*time.Millisecond).String())...)
	var killed []kill
	for k := range kills {
		killed = append(killed, k)
	}
	if len(killed) < 2 {
		t.Fatalf("killed %v; wanted server 1, then server 2 after a replacement for server 1 ran:\n%s", killed, r)
	}
	if r.code != 0 {
		t.Fatalf("the job did not survive the kills %v:\n%s", killed, r)
	}
	for _, want := range []string{"its keys moved to their backups", "a replacement rejoins the ring", "rejoined the ring"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("no line saying %q:\n%s", want, r)
		}
	}
	sparseLRResult(t, r, "after the kills, ")
}

// serverPids lists the processes running this test's spindle binary as a
// parameter server.
func serverPids() []int {
	want := []byte(spindleBin + "\x00ps\x00serve")
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []int
	for _, f := range cmdlines {
		if b, err := os.ReadFile(f); err == nil && bytes.HasPrefix(b, want) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}
