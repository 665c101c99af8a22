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
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/yarn/client"
)

// localizingLine is spindle status's line for a rank still fetching and
// unpacking its files.
var localizingLine = regexp.MustCompile(`rank \d+ on \S+: localizing: \d+ of [1-9]\d* bytes`)

// TestStatusShowsLocalizingRanks: while the executors of a running YARN
// job unpack an archive of many small files (what a packed Python
// environment looks like: 40,000, or 100,000 under make test-long, which
// takes two minutes more), spindle status APP_ID shows the ranks as
// localizing with the bytes read so far, from the job's API that the
// ResourceManager names, and that API (at the application's original
// tracking URL) gives the rank's state as localizing; once unpacked, the
// job runs and succeeds.
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
		"--conf", "spindle.executor.heartbeatInterval=200ms", "--archives", filepath.Join(work, "env.tar.gz")+"#env",
		"--", "sh", "-c", "test -f "+lastFile+" && echo unpacked-$SPINDLE_RANK")
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	id, _ := client.ParseAppID(app)
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ui := strings.TrimSuffix(rep.GetOriginalTrackingUrl(), "/")
	var last string // spindle status's last answer
	inStatus, inAPI := false, false
	deadline := time.Now().Add(testutil.Scale(2 * time.Minute))
	for !inStatus || !inAPI {
		cmd := exec.Command(spindleBin, "status", app)
		cmd.Env = env(hc.ConfDir)
		out, _ := cmd.CombinedOutput()
		if m := localizingLine.FindString(string(out)); m != "" && !inStatus {
			t.Logf("spindle status %s: %s", app, m)
			inStatus = true
		}
		last = string(out)
		if rv, ok := localizingInAPI(t, ui); ok && !inAPI {
			t.Logf("the job's API at the tracking URL: rank %d %s, %q", rv.Rank, rv.State, rv.Message)
			inAPI = true
		}
		select {
		case code := <-r.done:
			t.Fatalf("the job ended (exit %d) before a rank showed localizing in spindle status (%v) and the job's API (%v); status last said:\n%s\n--- stderr\n%s",
				code, inStatus, inAPI, last, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rank localizing in spindle status (%v) or the job's API (%v); status last said:\n%s", inStatus, inAPI, last)
		}
	}
	if code := r.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("spindle submit exited %d:\n%s", code, r.stderr.String())
	}
}

// localizingInAPI reads the job's API from its driver's web UI at ui (the
// application's original tracking URL) and returns a rank it shows as
// localizing with its bytes, if any.
func localizingInAPI(t *testing.T, ui string) (jobview.RankView, bool) {
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
		return jobview.RankView{}, false
	}
	var snap jobview.Snapshot
	if !get("/api/jobs/"+url.PathEscape(jobs[0].ID), &snap) {
		return jobview.RankView{}, false
	}
	for _, r := range snap.Ranks {
		if r.State == jobview.RankLocalizing && strings.HasPrefix(r.Message, "localizing: ") {
			return r, true
		}
	}
	return jobview.RankView{}, false
}
