package webui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/observe/jobview"
)

// runningJob is a two-rank job in its first seconds, with a few log lines.
func runningJob(t0 time.Time) *jobview.Job {
	j := jobview.NewJob()
	j.Apply(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-7", Name: "clicks", User: "ann",
		Mode: "local[2]", Command: []string{"python3", "train.py"}, WorldSize: 2,
		Settings: jobview.Redact(map[string]string{"spindle.feed.batchRows": "256", "spindle.authenticate.secret": "hunter2"})}})
	j.Apply(jobview.Event{Time: t0, Kind: jobview.KindJobState, State: jobview.StateRunning})
	for r := 0; r < 2; r++ {
		j.Apply(jobview.Event{Time: t0, Kind: jobview.KindExecutor, Rank: r, RoleRank: r, Role: "worker", Host: "127.0.0.1", State: jobview.RankRunning})
		j.Apply(jobview.Event{Time: t0, Kind: jobview.KindProgress, Rank: r, Progress: &jobview.Progress{}})
	}
	for i := 0; i < 3; i++ {
		j.Apply(jobview.Event{Time: t0, Kind: jobview.KindLog, Rank: 1, Stream: "stderr", Line: "warming up " + string(rune('a'+i))})
	}
	return j
}

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAPI(t *testing.T) {
	j := runningJob(time.Now().Add(-time.Minute))
	srv := httptest.NewServer(Handler(NewLive(j), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "m 1\n") })))
	defer srv.Close()

	code, body := get(t, srv, "/api/jobs/job-7")
	if code != 200 {
		t.Fatalf("job: %d %s", code, body)
	}
	var s jobview.Snapshot
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "clicks" || len(s.Ranks) != 2 || s.State != jobview.StateRunning {
		t.Errorf("snapshot %+v", s.Summary)
	}
	if strings.Contains(body, "hunter2") {
		t.Error("the job page shows the secret")
	}
	tests := []struct {
		path string
		code int
		want string
	}{
		{"/api/jobs", 200, `"id":"job-7"`},
		{"/api/jobs?q=CLICK", 200, `"id":"job-7"`},
		{"/api/jobs?q=other", 200, `[]`},
		{"/api/jobs?state=failed", 200, `[]`},
		{"/api/jobs/nope", 404, "no such job"},
		{"/api/jobs/job-7/ranks/1/log?stream=stderr", 200, `"warming up c"`},
		{"/api/jobs/job-7/ranks/1/log?from=2", 200, `"first":2`},
		{"/api/jobs/job-7/ranks/1/log?stream=env", 400, "want stdout or stderr"},
		{"/api/jobs/job-7/ranks/x/log", 400, "not a number"},
		{"/api/jobs/job-7/ranks/9/log", 404, "has no rank 9"},
		{"/api/jobs/job-7/ranks/1/log/download?stream=stderr", 200, "warming up a\nwarming up b\n"},
		{"/api/info", 200, `"job":"job-7"`},
		// Relative links: the pages work under a proxy's path prefix.
		{"/jobs/job-7", 200, "<script src=\"../static/app.js\">"},
		{"/jobs/job-7/ranks/1", 200, "<script src=\"../../../static/app.js\">"},
		{"/", 200, "<script src=\"./static/app.js\">"},
		{"/static/app.js", 200, "showJob"},
		{"/metrics", 200, "m 1"},
	}
	for _, tc := range tests {
		code, body := get(t, srv, tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %q, want %d containing %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	// Nothing in the UI changes a job.
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, srv.URL+"/api/jobs/job-7", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /api/jobs/job-7: %d, want 405", m, resp.StatusCode)
		}
	}
}

func TestServerRunsUntilItsContextEnds(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Handler(NewLive(runningJob(time.Now())), nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	resp, err := http.Get(s.URL("") + "api/info")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(s.URL("") + "api/info"); err == nil {
		t.Error("still serving after its context ended")
	}
}
