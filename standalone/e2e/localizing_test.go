package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// TestStatusShowsLocalizingRanks: while a job's executor fetches an
// archive (from a test HDFS whose datanodes hold their reads), spindle
// status on the standalone cluster shows the rank as localizing beside
// its application; once the archive is in place the job runs.
func TestStatusShowsLocalizingRanks(t *testing.T) {
	t.Parallel()
	hdfs := hdfstest.NewTestCluster(t, hdfstest.Config{Dir: t.TempDir(), DataNodes: 1})
	conf := t.TempDir()
	if err := hdfs.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	body := strings.Repeat("x", 4096)
	if err := tw.WriteHeader(&tar.Header{Name: "payload.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gw := fsys.NewResolver(fsys.Options{HadoopConfDir: conf, User: hdfs.Superuser()})
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	h, name, err := gw.Resolve(ctx, hdfs.URI()+"/envs/env.tar")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.MkdirAll(ctx, "/envs"); err != nil {
		t.Fatal(err)
	}
	w, err := h.CreateAtomic(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(archive.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}

	c := startCluster(t, 1)
	release := hdfs.HoldReads()
	defer release()
	j := c.submit(t.TempDir(), "--name", "localizing", "--conf", "spindle.hadoop.confDir="+conf,
		"--conf", "spindle.hadoop.user="+hdfs.Superuser(),
		"--num-executors", "1", "--executor-cores", "1", "--executor-memory", "256m",
		"--archives", hdfs.URI()+"/envs/env.tar#env",
		"--", "/bin/sh", "-c", `test -s "$SPINDLE_FILES_DIR/env/payload.txt"`)
	want := "rank 0 on "
	st := c.waitFor(time.Minute, "spindle status to show rank 0 localizing", func(st *client.Status) bool {
		for _, a := range st.Cluster.GetApps() {
			if a.GetName() == "localizing" && len(a.GetLocalizing()) == 1 &&
				strings.HasPrefix(a.GetLocalizing()[0], want) && strings.Contains(a.GetLocalizing()[0], "localizing: ") {
				return true
			}
		}
		return false
	})
	var text bytes.Buffer
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "localizing: ") {
		t.Errorf("spindle status does not show the rank localizing:\n%s", text.String())
	}
	release()
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("job with a slow archive: exit %d\n%s", code, j.stderr.String())
	}
}
