package e2e

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// TestLocalizingKeepsHeartbeating: an executor that takes longer than the
// driver's heartbeat timeout to fetch and unpack an archive goes on
// heartbeating, shows "localizing: N of M bytes" on the job page, and its
// job runs once the archive is in place. The archive lives in the test
// HDFS, whose datanodes hold its reads for three heartbeat timeouts.
func TestLocalizingKeepsHeartbeating(t *testing.T) {
	cluster := hdfstest.NewTestCluster(t, hdfstest.Config{Dir: t.TempDir(), DataNodes: 1})
	confDir := t.TempDir()
	if err := cluster.WriteConfig(confDir); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	local := filepath.Join(work, "env.tar")
	writeTar(t, local, map[string]string{"payload.txt": strings.Repeat("x", 4096)})
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: confDir, User: cluster.Superuser()})
	defer res.Close()
	upload(t, res, local, "hdfs:///envs/env.tar")
	st, err := os.Stat(local)
	if err != nil {
		t.Fatal(err)
	}

	release := cluster.HoldReads()
	defer release()
	const timeout = 1500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	cmd, m := startSpindle(t, ctx, work, uiLine, "submit", "--master", "local[1]", "--num-executors", "1",
		"--conf", "spindle.executor.heartbeatInterval=100ms", "--conf", "spindle.executor.heartbeatTimeout="+timeout.String(),
		"--conf", "spindle.ui.port=0", "--conf", "spindle.hadoop.confDir="+confDir, "--conf", "spindle.hadoop.user="+cluster.Superuser(),
		"--archives", "hdfs:///envs/env.tar#env",
		"--", "/bin/sh", "-c", `test -s "$SPINDLE_FILES_DIR/env/payload.txt"`)
	jobID, ui := m[1], m[2]

	want := fmt.Sprintf("localizing: 0 of %d bytes", st.Size())
	var seen time.Time
	testutil.WaitFor(t, time.Minute, testutil.Holds("rank 0 localizing for three heartbeat timeouts", func() bool {
		var snap jobview.Snapshot
		getJSON(t, ui+"api/jobs/"+jobID, &snap)
		if snap.State != jobview.StateRunning && snap.State != jobview.StateSubmitted {
			t.Fatalf("job %s while its executor localizes: %s", snap.State, snap.Reason)
		}
		if len(snap.Ranks) != 1 || snap.Ranks[0].State != jobview.RankLocalizing {
			return false
		}
		// Until the archive's size is read the message has no total:
		// on a busy machine the page may be read in between.
		if msg := snap.Ranks[0].Message; msg == "localizing: 0 bytes" {
			return false
		} else if msg != want {
			t.Fatalf("rank 0's message while localizing: %q, want %q", msg, want)
		}
		if seen.IsZero() {
			seen = time.Now()
		}
		return time.Since(seen) > 3*timeout
	}))
	release()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("job with a slow archive: %v", err)
	}
}

func writeTar(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}
