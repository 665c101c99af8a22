package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/jobview"
)

var (
	uiLine      = regexp.MustCompile(`job (\S+): web UI at (http://\S+/)`)
	historyLine = regexp.MustCompile(`history server for \S+ at (http://\S+/)`)
)

// startSpindle starts the spindle binary and returns the first match of
// re in its stderr; the rest of stderr is drained in the background.
func startSpindle(t *testing.T, ctx context.Context, dir string, re *regexp.Regexp, args ...string) (*exec.Cmd, []string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, spindleBin, args...)
	cmd.Dir = dir
	cmd.Env = testEnv()
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var sent bool
		var seen []string
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m
				sent = true
			}
		}
		if !sent {
			found <- append([]string{"<not found>"}, seen...)
		}
	}()
	select {
	case m := <-found:
		if m[0] == "<not found>" {
			t.Fatalf("spindle %v never printed %s:\n%s", args, re, strings.Join(m[1:], "\n"))
		}
		return cmd, m
	case <-time.After(testutil.Scale(60 * time.Second)):
		t.Fatalf("spindle %v did not print %s in time", args, re)
	}
	return nil, nil
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestJobUIMetricsAndHistory: a running job shows its ranks, their output
// and its metrics on the driver's UI; once it ended, spindle history shows
// it from its event log.
func TestJobUIMetricsAndHistory(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 2000, 2)
	events := filepath.Join(t.TempDir(), "events")
	gate := filepath.Join(t.TempDir(), "go")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Minute))
	defer cancel()
	cmd, m := startSpindle(t, ctx, data, uiLine, submitArgs("--name", "ui-check", "--num-executors", "2", "--input", data,
		"--conf", "spindle.ui.port=0", "--conf", "spindle.eventLog.dir="+events, "--conf", "spindle.eventLog.flushInterval=200ms",
		"--", "/bin/sh", "-c", "echo hello from $SPINDLE_RANK; while [ ! -e "+gate+" ]; do sleep 0.1; done")...)
	jobID, ui := m[1], m[2]

	var snap jobview.Snapshot
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("both ranks running on the job page", func() bool {
		getJSON(t, ui+"api/jobs/"+jobID, &snap)
		running := 0
		for _, r := range snap.Ranks {
			if r.State == jobview.RankRunning {
				running++
			}
		}
		return running == 2
	}))

	if snap.Name != "ui-check" || snap.State != jobview.StateRunning || snap.Settings["spindle.ui.port"] != "0" {
		t.Errorf("job page: %+v", snap.Summary)
	}
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("rank 1's output on its log page", func() bool {
		var c jobview.LogChunk
		getJSON(t, ui+"api/jobs/"+jobID+"/ranks/1/log?stream=stdout", &c)
		return len(c.Lines) > 0 && c.Lines[0] == "hello from 1"
	}))

	metrics := getText(t, ui+"metrics")
	if !strings.Contains(metrics, `spindle_executors{role="worker",state="running"} 2`) {
		t.Errorf("/metrics does not count 2 running workers:\n%s", metrics)
	}
	// The control plane's calls, counted by the gRPC chain: both workers
	// registered.
	if !strings.Contains(metrics, `spindle_grpc_server_handled_total{code="OK",method="/spindle.control.v1.Control/Register"} 2`) {
		t.Errorf("/metrics does not count the 2 workers' registrations:\n%s", metrics)
	}
	// The running job is already in the event log.
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("the running job in its event log", func() bool {
		_, err := os.Stat(filepath.Join(events, jobID))
		return err == nil
	}))

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}

	hist, hm := startSpindle(t, ctx, t.TempDir(), historyLine, "history", "--dir", events, "--address", "127.0.0.1:0")
	defer func() { _ = hist.Process.Kill(); _ = hist.Wait() }()
	var jobs []jobview.Summary
	getJSON(t, hm[1]+"api/jobs", &jobs)
	if len(jobs) != 1 || jobs[0].ID != jobID || jobs[0].State != jobview.StateSucceeded || jobs[0].Name != "ui-check" {
		t.Fatalf("history lists %+v", jobs)
	}
	getJSON(t, hm[1]+"api/jobs/"+jobID, &snap)
	if len(snap.Ranks) != 2 || snap.Ranks[1].Host == "" {
		t.Errorf("history job page ranks: %+v", snap.Ranks)
	}
}

func TestHistoryBadDirectory(t *testing.T) {
	t.Parallel()
	r := spindle(t, t.TempDir(), "history", "--dir", filepath.Join(t.TempDir(), "missing"))
	if r.code != 2 || !strings.Contains(r.stderr, "missing") {
		t.Fatalf("want exit 2 naming the directory:\n%s", r)
	}
}
