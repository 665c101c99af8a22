package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestLogsCommand: spindle logs prints a job's output from its event log,
// for every rank or one, and follows a running job through its web UI.
func TestLogsCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	events := filepath.Join(dir, "events")
	gate := filepath.Join(dir, "go")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Minute))
	defer cancel()
	cmd, m := startSpindle(t, ctx, dir, uiLine, submitArgs("--num-executors", "2",
		"--conf", "spindle.ui.port=0", "--conf", "spindle.eventLog.dir="+events, "--conf", "spindle.eventLog.flushInterval=200ms",
		"--", "/bin/sh", "-c", `echo "out $SPINDLE_RANK"; echo "err $SPINDLE_RANK" >&2; while [ ! -e `+gate+` ]; do sleep 0.05; done; echo "late $SPINDLE_RANK"`)...)
	jobID, ui := m[1], m[2]

	// Follow rank 1 through the running driver's UI.
	follow := exec.CommandContext(ctx, spindleBin, "logs", "--ui", ui, "--rank", "1", "-f", "--poll", "100ms", jobID)
	var fout, ferr syncbuf.Buffer
	follow.Stdout, follow.Stderr = &fout, &ferr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("rank 1's first line from logs -f", func() bool {
		if follow.ProcessState != nil {
			t.Fatalf("logs -f ended early:\n%s%s", fout.String(), ferr.String())
		}
		return strings.Contains(fout.String(), "[rank 1] out 1")
	}))

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if err := follow.Wait(); err != nil {
		t.Fatalf("logs -f: %v\n%s", err, ferr.String())
	}
	if strings.Contains(fout.String(), "rank 0") {
		t.Errorf("logs --rank 1 printed rank 0:\n%s", fout.String())
	}

	r := spindle(t, dir, "logs", "--dir", events, jobID)
	if r.code != 0 {
		t.Fatalf("logs --dir: %s", r)
	}
	for _, want := range []string{"[rank 0] out 0", "[rank 1] out 1", "[rank 0] late 0", "[rank 1] late 1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("logs stdout lacks %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stderr, "[rank 1] err 1") || strings.Contains(r.stdout, "err") {
		t.Errorf("stderr lines belong on stderr:\n%s", r)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--rank", "5", jobID}, "no rank 5"},
		{[]string{"--role", "ps", jobID}, `role "ps"`},
		{[]string{"nope-job"}, "nope-job"},
		{[]string{"--ui", "localhost:4040", jobID}, "--ui"},
		{[]string{"application_1700000000000_0042"}, "yarn logs -applicationId application_1700000000000_0042"},
	} {
		args := append([]string{"logs"}, bad.args...)
		if bad.args[0] != "--ui" && !strings.HasPrefix(bad.args[0], "application_") {
			args = append([]string{"logs", "--dir", events}, bad.args...)
		}
		r := spindle(t, dir, args...)
		if r.code != 2 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("spindle %v: want exit 2 naming %q:\n%s", args, bad.want, r)
		}
	}
}
