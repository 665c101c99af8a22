package webui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/eventlog"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// chromium returns the headless browser the page tests drive: Debian's
// chromium, which `make test` installs.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH (make test installs Debian's chromium)")
	return ""
}

// render loads url in headless Chromium, lets its scripts run for budget of
// virtual time, and returns the rendered DOM. With $SPINDLE_TEST_ARTIFACTS
// set it also keeps a screenshot there, named shot: a second Chromium
// per page (a fifth of the package's CPU), not started when nobody keeps
// the picture.
func render(t *testing.T, url string, budget time.Duration, shot string) string {
	t.Helper()
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(90*time.Second))
	defer cancel()
	profile := t.TempDir()
	args := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + profile,
		"--window-size=1280,900", "--virtual-time-budget=" + strconv.Itoa(int(budget.Milliseconds()))}
	out, err := exec.CommandContext(ctx, bin, append(args, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", url, err)
	}
	dir := os.Getenv("SPINDLE_TEST_ARTIFACTS")
	if dir != "" && shot != "" {
		path := filepath.Join(dir, shot)
		if err := exec.CommandContext(ctx, bin, append(args, "--screenshot="+path, url)...).Run(); err != nil {
			t.Logf("screenshot %s: %v", path, err)
		}
	}
	return string(out)
}

// afterFirst applies change once the page has fetched path once, so the
// page's next poll is the only way the change can reach the DOM.
func afterFirst(h http.Handler, path string, change func()) http.Handler {
	var n atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == path && n.Add(1) == 1 {
			change()
		}
	})
}

func TestJobPageInBrowserUpdatesLive(t *testing.T) {
	t0 := time.Now().Add(-30 * time.Second)
	j := runningJob(t0)
	srv := httptest.NewServer(afterFirst(Handler(NewLive(j), nil), "/api/jobs/job-7", func() {
		now := time.Now()
		j.Apply(jobview.Event{Time: now, Kind: jobview.KindProgress, Rank: 0, Progress: &jobview.Progress{Epoch: 1, Rows: 123456,
			GPUs: 1, GPUUtilRatio: 0.73, GPUMemoryBytes: 3 << 29}})
		j.Apply(jobview.Event{Time: now, Kind: jobview.KindExecutor, Rank: 1, State: jobview.RankFinished})
	}))
	defer srv.Close()

	dom := render(t, srv.URL+"/", 4*time.Second, "job-page.png")
	if got := strings.Count(dom, `class="rank`); got != 2 {
		t.Fatalf("%d rank rows rendered, want 2:\n%s", got, dom)
	}
	for _, want := range []string{"clicks", "python3 train.py", "127.0.0.1", "123.5k", `class="state finished"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page does not show %q after a live update:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, "hunter2") {
		t.Error("the page shows the job secret")
	}
	// Rank 0's GPU cell shows its use; rank 1 was given no GPU.
	gpuCells := regexp.MustCompile(`<td class="num gpu"[^>]*>([^<]*)</td>`).FindAllStringSubmatch(dom, -1)
	if len(gpuCells) != 2 || gpuCells[0][1] != "73% · 1.50 GiB" || gpuCells[1][1] != "" || !strings.Contains(dom, "<th>GPU</th>") {
		t.Errorf("GPU cells %q, want rank 0's use (73%% · 1.50 GiB) and nothing for rank 1:\n%s", gpuCells, dom)
	}
}

// TestReportedValuesChartOneLinePerRank: values two ranks report under one
// name are drawn as a line per rank, not one line zigzagging between them.
func TestReportedValuesChartOneLinePerRank(t *testing.T) {
	t0 := time.Now().Add(-30 * time.Second)
	j := runningJob(t0)
	for step := 0; step < 4; step++ {
		for r := 0; r < 2; r++ {
			j.Apply(jobview.Event{Time: t0.Add(time.Duration(step) * time.Second), Kind: jobview.KindScalars, Rank: r, Step: int64(step),
				Values: map[string]float64{"loss": 1 / float64(step+1+r)}})
		}
	}
	srv := httptest.NewServer(Handler(NewLive(j), nil))
	defer srv.Close()

	dom := render(t, srv.URL+"/", 2*time.Second, "job-page-loss.png")
	lines := regexp.MustCompile(`<polyline [^>]*data-rank="(\d+)"`).FindAllStringSubmatch(dom, -1)
	if len(lines) != 2 || lines[0][1] != "0" || lines[1][1] != "1" {
		t.Fatalf("loss chart lines by rank %q, want one for rank 0 and one for rank 1:\n%s", lines, dom)
	}
	if !strings.Contains(dom, "last 0.25, max 1 (rank 0, 2 ranks)") {
		t.Errorf("loss chart caption does not quote rank 0's last value:\n%s", dom)
	}
}

func TestFailedJobShowsItsReason(t *testing.T) {
	j := runningJob(time.Now().Add(-time.Minute))
	j.Apply(jobview.Event{Time: time.Now(), Kind: jobview.KindExecutor, Rank: 1, State: jobview.RankFailed, Message: "exit status 3"})
	j.Apply(jobview.Event{Time: time.Now(), Kind: jobview.KindJobState, State: jobview.StateFailed,
		Reason: "rank 1 on 127.0.0.1 exited with status 3: ValueError: bad batch"})
	srv := httptest.NewServer(Handler(NewLive(j), nil))
	defer srv.Close()
	dom := render(t, srv.URL+"/jobs/job-7", 2*time.Second, "")
	if !strings.Contains(dom, `id="reason"`) || !strings.Contains(dom, "ValueError: bad batch") || !strings.Contains(dom, `class="state FAILED"`) {
		t.Fatalf("the failure reason is not shown:\n%s", dom)
	}
}

// TestSlowLinkShown: a slow link between two ranks (reported by task.Comm)
// is listed on the job page: the pair and its round trip.
func TestSlowLinkShown(t *testing.T) {
	j := runningJob(time.Now().Add(-time.Minute))
	j.Apply(jobview.Event{Time: time.Now(), Kind: jobview.KindScalars, Rank: 0, Values: map[string]float64{"collective.slow_link_ms.rank_1": 412.4}})
	srv := httptest.NewServer(Handler(NewLive(j), nil))
	defer srv.Close()
	dom := render(t, srv.URL+"/jobs/job-7", 2*time.Second, "")
	if !strings.Contains(dom, `id="slow-links"`) || !strings.Contains(dom, "rank 0 ↔ rank 1: 412 ms probe round trip") {
		t.Fatalf("the slow link is not shown:\n%s", dom)
	}
}

// TestPushedJobShowsWhereToPush: a job whose input is pushed shows its
// endpoint and the token's file (never a token) on its page.
func TestPushedJobShowsWhereToPush(t *testing.T) {
	j := jobview.NewJob()
	j.Apply(jobview.Event{Time: time.Now(), Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-8", Name: "etl-fed",
		Mode: "local[2]", Command: []string{"python3", "train.py"}, WorldSize: 2,
		Push: &jobview.PushInput{Endpoint: "grpc+tls://10.0.0.5:8815", TokenFile: "/tmp/job-8.token", CAFile: "/tmp/job-8.ca.pem"}}})
	j.Apply(jobview.Event{Time: time.Now(), Kind: jobview.KindJobState, State: jobview.StateRunning})
	srv := httptest.NewServer(Handler(NewLive(j), nil))
	defer srv.Close()
	dom := render(t, srv.URL+"/jobs/job-8", 2*time.Second, "")
	want := `<dd id="push">producers DoPut to grpc+tls://10.0.0.5:8815, token in /tmp/job-8.token, CA certificate in /tmp/job-8.ca.pem</dd>`
	if !strings.Contains(dom, want) {
		t.Fatalf("the page does not say where producers push (want %s):\n%s", want, dom)
	}
}

func TestLogPageFollows(t *testing.T) {
	j := runningJob(time.Now())
	srv := httptest.NewServer(afterFirst(Handler(NewLive(j), nil), "/api/jobs/job-7/ranks/1/log", func() {
		j.Apply(jobview.Event{Time: time.Now(), Kind: jobview.KindLog, Rank: 1, Stream: "stderr", Line: "epoch 2 loss 0.31"})
	}))
	defer srv.Close()
	dom := render(t, srv.URL+"/jobs/job-7/ranks/1", 4*time.Second, "")
	if !strings.Contains(dom, "warming up a") || !strings.Contains(dom, "epoch 2 loss 0.31") {
		t.Fatalf("the log page did not follow the new line:\n%s", dom)
	}
}

func TestHistoryListAndSearch(t *testing.T) {
	dir := t.TempDir()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	for _, job := range []struct{ id, name, state string }{{"j-1", "clicks-daily", jobview.StateSucceeded}, {"j-2", "ranker", jobview.StateFailed}} {
		w, err := eventlog.NewWriter(ctx, res, dir, job.id, time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Record(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: job.id, Name: job.name, User: "ann", Mode: "local[2]"}})
		w.Record(jobview.Event{Time: t0.Add(time.Minute), Kind: jobview.KindJobState, State: job.state, Reason: "rank 0 exited 1"})
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(Handler(NewHistory(res, dir), nil))
	defer srv.Close()

	dom := render(t, srv.URL+"/", 2*time.Second, "history.png")
	if !strings.Contains(dom, `data-job="j-1"`) || !strings.Contains(dom, `data-job="j-2"`) || !strings.Contains(dom, "1m00s") {
		t.Fatalf("history list:\n%s", dom)
	}
	dom = render(t, srv.URL+"/?q=rank", 2*time.Second, "")
	if strings.Contains(dom, `data-job="j-1"`) || !strings.Contains(dom, `data-job="j-2"`) {
		t.Fatalf("search by name did not filter:\n%s", dom)
	}
	dom = render(t, srv.URL+"/jobs/j-2", 2*time.Second, "")
	if !strings.Contains(dom, "rank 0 exited 1") {
		t.Fatalf("a finished job's page lacks its reason:\n%s", dom)
	}
}

// TestPagesBehindAProxy: behind a proxy that serves the UI under a path
// prefix, as YARN's ResourceManager serves an application's tracking URL
// at /proxy/APP_ID/, the job page and its rank pages load and link within
// the prefix.
func TestPagesBehindAProxy(t *testing.T) {
	j := runningJob(time.Now().Add(-time.Minute))
	ui := http.StripPrefix("/proxy/application_1_0001", Handler(NewLive(j), nil))
	mux := http.NewServeMux()
	mux.Handle("/proxy/application_1_0001/", ui)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dom := render(t, srv.URL+"/proxy/application_1_0001/", 3*time.Second, "")
	if !strings.Contains(dom, "job-7") || !strings.Contains(dom, `href="/proxy/application_1_0001/jobs/job-7/ranks/1"`) {
		t.Fatalf("the job page behind the proxy:\n%s", dom)
	}
	dom = render(t, srv.URL+"/proxy/application_1_0001/jobs/job-7/ranks/1", 3*time.Second, "")
	if !strings.Contains(dom, "warming up a") {
		t.Fatalf("the rank's log page behind the proxy:\n%s", dom)
	}
}

// TestRenumberedRanksShown: after an elastic job went on without rank 1 in
// place, each row of the ranks table shows the process that holds its
// rank now with the rank it had, the rank that left is named, and the
// timeline says who moved.
func TestRenumberedRanksShown(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	j := jobview.NewJob()
	j.Apply(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-9", Name: "shrunk",
		Mode: "local[3]", Command: []string{"python3", "train.py"}, WorldSize: 3}})
	for r := 0; r < 3; r++ {
		j.Apply(jobview.Event{Time: t0, Kind: jobview.KindExecutor, Rank: r, Host: "h" + strconv.Itoa(r),
			Executor: "exec-" + strconv.Itoa(r), State: jobview.RankRunning})
	}
	moves := jobview.Renumbering(1, 3)
	j.Apply(jobview.Event{Time: t0.Add(12 * time.Second), Kind: jobview.KindRenumber, Rank: 1, Renumbered: moves,
		Message: jobview.RenumberMessage(1, moves)})
	srv := httptest.NewServer(Handler(NewLive(j), nil))
	defer srv.Close()
	dom := render(t, srv.URL+"/jobs/job-9", 2*time.Second, "job-page-renumbered.png")
	rows := regexp.MustCompile(`<tr class="rank[^"]*" data-rank="(\d)">.*?</tr>`).FindAllStringSubmatch(dom, -1)
	if len(rows) != 2 || !strings.Contains(rows[1][0], "h2") || !strings.Contains(rows[1][0], "(was 2)") || rows[1][1] != "1" {
		t.Fatalf("rank rows %q, want rank 0 and rank 1 held by h2's process (was 2):\n%s", rows, dom)
	}
	for _, want := range []string{`id="left-ranks"`, "Went on without: rank 1 (h1, exec-1, 0 rows)",
		`id="timeline"`, "12s: rank 1 left; rank 2 is now rank 1"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page does not show %q:\n%s", want, dom)
		}
	}
}
