package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/yarn/client"
)

// TestStatusShowsLocalizingRanks: while the executors of a running YARN
// job unpack an archive of many small files (what a packed Python
// environment looks like: 40,000, or 100,000 under make test-long, which
// takes two minutes more), the job's API (at the application's original
// tracking URL, which the ResourceManager names) gives a rank's state as
// localizing with the bytes read so far, and spindle status APP_ID shows
// that rank as localizing; once unpacked, the job runs and succeeds.
//
// Unpacking takes a few seconds, shorter than a spindle status process
// can take to start and answer on a loaded machine, so once the API shows
// a rank localizing the test stops that rank's executor (SIGSTOP) until
// spindle status has answered, then lets it go on; the job's heartbeat
// timeout is long enough for the pause.
func TestStatusShowsLocalizingRanks(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	work := t.TempDir()
	files := 40000
	if longTests() {
		files = 100000
	}
	writeManyFileArchive(t, filepath.Join(work, "env.tar.gz"), files)
	lastFile := fmt.Sprintf("env/lib/d%d/f%d.py", (files-1)/1000, files-1)
	r := start(t, hc.ConfDir, "--name", "localizing", "--num-executors", "2", "--executor-memory", "256m",
		"--conf", "spindle.executor.heartbeatInterval=200ms",
		"--conf", "spindle.executor.heartbeatTimeout="+testutil.Scale(2*time.Minute).String(),
		"--archives", filepath.Join(work, "env.tar.gz")+"#env",
		"--", "sh", "-c", "test -f "+lastFile+" && echo unpacked-$SPINDLE_RANK")
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	pids := executorPIDs(t, r.stderr.String())
	id, _ := client.ParseAppID(app)
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ui := strings.TrimSuffix(rep.GetOriginalTrackingUrl(), "/")

	rank := holdLocalizingRank(t, r, ui, pids)
	cmd := exec.Command(spindleBin, "status", app)
	cmd.Env = env(hc.ConfDir)
	out, err := cmd.CombinedOutput()
	release(t, pids[rank])
	want := regexp.MustCompile(fmt.Sprintf(`rank %d on \S+: localizing: \d+ of [1-9]\d* bytes`, rank))
	if err != nil || !want.Match(out) {
		t.Fatalf("spindle status %s (%v) shows no %s while rank %d is held localizing:\n%s", app, err, want, rank, out)
	}
	t.Logf("spindle status %s: %s", app, want.Find(out))
	if code := r.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("spindle submit exited %d:\n%s", code, r.stderr.String())
	}
}

// executorPIDRE is the driver's log line for a registered executor.
var executorPIDRE = regexp.MustCompile(`msg="executor registered" .* rank=(\d+) .* pid=(\d+)`)

// executorPIDs maps each rank to its executor's process id, from the
// driver's log (the mini cluster's containers run on this machine).
func executorPIDs(t *testing.T, log string) map[int]int {
	t.Helper()
	pids := map[int]int{}
	for _, m := range executorPIDRE.FindAllStringSubmatch(log, -1) {
		rank, _ := strconv.Atoi(m[1])
		pids[rank], _ = strconv.Atoi(m[2])
	}
	if len(pids) == 0 {
		t.Fatalf("no executor registered with a pid in the driver's log:\n%s", log)
	}
	return pids
}

// holdLocalizingRank polls the job's API at ui until it shows a rank
// localizing with its bytes, stops that rank's executor, and returns the
// rank once the API, read again after the stop, still shows it
// localizing (a heartbeat sent just before the stop may have ended it;
// then the executor goes on and the polling too). It fails the test if
// the job ends first.
func holdLocalizingRank(t *testing.T, r *running, ui string, pids map[int]int) int {
	t.Helper()
	budget := testutil.NewBudget(2 * time.Minute)
	for {
		select {
		case code := <-r.done:
			t.Fatalf("the job ended (exit %d) before its API at %s showed a rank localizing:\n%s", code, ui, r.stderr.String())
		default:
		}
		if budget.Spent() {
			t.Fatalf("no rank localizing in the job's API at %s within %s:\n%s", ui, budget, r.stderr.String())
		}
		localizing := localizingInAPI(t, ui)
		if len(localizing) == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		rv := localizing[0]
		pid, known := pids[rv.Rank]
		if !known {
			t.Fatalf("the job's API shows rank %d localizing, but the driver logged no executor pid for it", rv.Rank)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("stopping rank %d's executor (pid %d): %v", rv.Rank, pid, err)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
		// A heartbeat already on its way settles within its interval.
		time.Sleep(500 * time.Millisecond)
		for _, again := range localizingInAPI(t, ui) {
			if again.Rank == rv.Rank {
				t.Logf("the job's API at the tracking URL: rank %d %s, %q (executor pid %d held)", again.Rank, again.State, again.Message, pid)
				return rv.Rank
			}
		}
		release(t, pid)
	}
}

// release lets a stopped executor go on.
func release(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("resuming executor pid %d: %v", pid, err)
	}
}

// localizingMessageRE is a localizing rank's message once its files'
// size is known.
var localizingMessageRE = regexp.MustCompile(`^localizing: \d+ of [1-9]\d* bytes$`)

// localizingInAPI reads the job's API from its driver's web UI at ui (the
// application's original tracking URL) and returns the ranks it shows as
// localizing with their bytes read and the total.
func localizingInAPI(t *testing.T, ui string) []jobview.RankView {
	t.Helper()
	get := func(path string, v any) bool {
		resp, err := http.Get(ui + path)
		if err != nil {
			t.Logf("GET %s%s: %v", ui, path, err)
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Logf("GET %s%s: %s", ui, path, resp.Status)
			return false
		}
		return json.NewDecoder(resp.Body).Decode(v) == nil
	}
	var jobs []jobview.Summary
	if !get("/api/jobs", &jobs) || len(jobs) != 1 {
		return nil
	}
	var snap jobview.Snapshot
	if !get("/api/jobs/"+url.PathEscape(jobs[0].ID), &snap) {
		return nil
	}
	var localizing []jobview.RankView
	for _, r := range snap.Ranks {
		if r.State == jobview.RankLocalizing && localizingMessageRE.MatchString(r.Message) {
			localizing = append(localizing, r)
		}
	}
	return localizing
}
