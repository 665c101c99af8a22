package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// reportScript reports a falling loss while it burns some CPU, until the
// gate file appears.
const reportScript = `
import os, sys, time
import spindle
gate = sys.argv[1]
step = 0
while not os.path.exists(gate):
    sum(i * i for i in range(20000))
    spindle.report(step=step, loss=1.0 / (step + 1))
    step += 1
    time.sleep(0.02)
`

// TestReportedValuesAndUsage: what a training process reports with
// spindle.report reaches the job page's charts and its event log, and the
// ranks table shows each rank's CPU and memory.
func TestReportedValuesAndUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "report.py")
	writeFile(t, script, reportScript)
	gate := filepath.Join(dir, "go")
	events := filepath.Join(dir, "events")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Minute))
	defer cancel()
	cmd, m := startSpindle(t, ctx, dir, uiLine, submitArgs("--num-executors", "2",
		"--conf", "spindle.ui.port=0", "--conf", "spindle.eventLog.dir="+events,
		"--", "/usr/bin/python3", script, gate)...)
	jobID, ui := m[1], m[2]
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	var snap jobview.Snapshot
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("reported losses and both ranks' CPU and memory on the job page", func() bool {
		getJSON(t, ui+"api/jobs/"+jobID, &snap)
		if len(snap.Scalars["loss"]) < 3 || len(snap.Ranks) != 2 {
			return false
		}
		for _, r := range snap.Ranks {
			if r.MemoryBytes <= 0 || r.CPUPercent <= 0 {
				return false
			}
		}
		return true
	}))

	// Each rank's losses fall; the ranks' points interleave in time.
	byRank := map[int][]float64{}
	for _, p := range snap.Scalars["loss"] {
		if p.Rank == nil {
			t.Fatalf("loss point %+v names no rank", p)
		}
		byRank[*p.Rank] = append(byRank[*p.Rank], p.V)
	}
	for rank, vs := range byRank {
		if vs[0] > 1 || len(vs) > 1 && vs[len(vs)-1] >= vs[0] {
			t.Errorf("rank %d's loss points %v: want the reported falling loss", rank, vs)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}

	hist, hm := startSpindle(t, ctx, t.TempDir(), historyLine, "history", "--dir", events, "--address", "127.0.0.1:0")
	defer func() { _ = hist.Process.Kill(); _ = hist.Wait() }()
	getJSON(t, hm[1]+"api/jobs/"+jobID, &snap)
	if len(snap.Scalars["loss"]) < 3 {
		t.Errorf("history shows %d loss points, want the reported ones", len(snap.Scalars["loss"]))
	}
}
