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

// TestSubmitLostNodeIsNotTheJobsFault: mid-job, a NodeManager running one
// of a restart-policy job's executors is lost with its containers, which YARN
// reports aborted (-100): a loss not the job's fault, so the job restarts
// on the nodes left even with spindle.failure.maxRestarts 0, and every
// epoch still feeds each row exactly once.
func TestSubmitLostNodeIsNotTheJobsFault(t *testing.T) {
	t.Parallel()
	const rows, epochs = 4000, 6
	s := startSite(t, yarntest.Config{NodeManagers: 3})
	data := t.TempDir()
	ids, err := rowsum.WriteIDs(data, rows)
	if err != nil {
		t.Fatal(err)
	}
	j := s.submit(t, "--name", "lost-node", "--num-executors", "2", "--executor-memory", "256m",
		"--input", ids, "--label-column", "id", "--feed", "tensor", "--batch-rows", "10",
		"--epochs", fmt.Sprint(epochs), "--shuffle", "--seed", "6", "--checkpoint-dir", filepath.Join(data, "ckpt"),
		"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=0",
		"--", rowcheckBin, "--every", "5", "--pause", "5ms")
	runningExecutorOf(t, s, j, 2)
	// Mid-job: once both ranks finished a checkpoint.
	j.until(t, 2*time.Minute, "complete checkpoint", func() bool { return checkpointedBy(filepath.Join(data, "ckpt"), 2) })
	am := -1
	for _, ct := range s.yarn.Containers() {
		if ct.AM && ct.Running {
			am = ct.Node
		}
	}
	victim := -1
	for _, ct := range s.yarn.Containers() {
		if ct.ExecutorID != "" && ct.Running && ct.Node != am {
			victim = ct.Node
		}
	}
	if victim < 0 {
		t.Fatalf("every executor runs beside the ApplicationMaster: %+v", s.yarn.Containers())
	}
	if err := s.yarn.LoseNode(victim); err != nil {
		t.Fatal(err)
	}
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("the job failed after losing a NodeManager: exit %d\n%s", code, j.stderr.String())
	}
	out := j.stderr.String()
	for _, want := range []string{"Container released on a *lost* node (not the job's fault)",
		"not counted against spindle.failure.maxRestarts; 1 of 10 such restarts"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := rowsum.Check(out, 2, epochs, rows); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

var rankHostLine = regexp.MustCompile(`rank (\d) generation (\d) on (127\.0\.0\.\d+)`)

// TestSubmitFailingHostIsLeftOut: with spindle.failure.hostMaxFailures 1,
// the host where a rank failed gets none of the next generation's
// executors: the ApplicationMaster puts it on the application's blacklist,
// and the ResourceManager grants no container there.
func TestSubmitFailingHostIsLeftOut(t *testing.T) {
	t.Parallel()
	s := startSite(t, yarntest.Config{Nodes: []yarntest.NodeConfig{
		{MemoryMB: 4096, VCores: 4, Host: "127.0.0.1"}, {MemoryMB: 4096, VCores: 4, Host: "127.0.0.2"}}})
	script := `echo "rank $SPINDLE_RANK generation $SPINDLE_GENERATION on $NM_HOST"
if [ "$SPINDLE_GENERATION" = 0 ] && [ "$SPINDLE_RANK" = 1 ]; then exit 3; fi`
	j := s.submit(t, "--name", "badhost", "--num-executors", "2", "--executor-memory", "256m",
		"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.hostMaxFailures=1",
		"--", "/bin/sh", "-c", script)
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("restarted job: exit %d\n%s", code, j.stderr.String())
	}
	out := j.stderr.String()
	where := map[[2]string]string{}
	for _, m := range rankHostLine.FindAllStringSubmatch(out, -1) {
		where[[2]string{m[1], m[2]}] = m[3]
	}
	bad := where[[2]string{"1", "0"}]
	if bad == "" || where[[2]string{"0", "1"}] == "" || where[[2]string{"1", "1"}] == "" {
		t.Fatalf("cannot tell where the ranks ran (%v):\n%s", where, out)
	}
	if where[[2]string{"0", "1"}] == bad || where[[2]string{"1", "1"}] == bad {
		t.Errorf("generation 1 was placed on %s, where rank 1 failed (%v):\n%s", bad, where, out)
	}
	if !strings.Contains(out, "host "+bad+" failed the job 1 times") {
		t.Errorf("the exclusion of %s was not announced:\n%s", bad, out)
	}
}

// TestSubmitShowsProgress: while a job runs, YARN shows its progress (the
// rows its ranks took, out of all it feeds), in client and cluster mode;
// it was 0 for the whole job before.
func TestSubmitShowsProgress(t *testing.T) {
	t.Parallel()
	s := startSite(t, yarntest.Config{})
	data := t.TempDir()
	ids, err := rowsum.WriteIDs(data, 2000)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			j := s.submit(t, "--deploy-mode", mode, "--name", "progress", "--num-executors", "2", "--executor-memory", "256m",
				"--input", ids, "--label-column", "id", "--feed", "tensor", "--batch-rows", "10",
				"--epochs", "3", "--checkpoint-dir", filepath.Join(data, "ckpt-"+mode), "--", rowcheckBin, "--pause", "10ms")
			var app string
			var seen float32
			j.until(t, 2*time.Minute, "progress between 0 and 1 in YARN", func() bool {
				if m := appIDRE.FindStringSubmatch(j.stderr.String()); m != nil {
					app = m[1]
					seen, _ = s.yarn.Progress(app)
				}
				return seen != 0 && seen != 1
			})
			if code := j.wait(t, 3*time.Minute); code != 0 {
				t.Fatalf("job: exit %d\n%s", code, j.stderr.String())
			}
			t.Logf("YARN showed %.2f while the job ran", seen)
		})
	}
}
