package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/krbtest"
	yarnclient "github.com/spindle-ml/spindle/yarn/client"
)

func TestMinicluster(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(t.TempDir(), "part-0.csv")
	if err := os.WriteFile(local, []byte("x,label\n1,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var out syncbuf.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, io.Discard
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(runCtx, []string{"spindle", "minicluster", "--dir", dir, "--datanodes", "2",
			"--block-size", "64KiB", "--put", filepath.Join(filepath.Dir(local), "*.csv") + "=/user/demo/data", "--log-level", "error"})
	}()
	for !strings.Contains(out.String(), "Press Ctrl-C") {
		select {
		case err := <-done:
			t.Fatalf("minicluster exited early: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("minicluster did not start:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	conf := filepath.Join(dir, "hadoop-conf")
	if !strings.Contains(out.String(), "export HADOOP_CONF_DIR="+conf) {
		t.Fatalf("usage does not say how to set HADOOP_CONF_DIR:\n%s", out.String())
	}

	// The written yarn-site.xml reaches the test YARN's ResourceManager.
	yconf, err := yarnclient.LoadConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	rms, err := yconf.RMAddrs()
	if err != nil {
		t.Fatal(err)
	}
	rm, err := yarnclient.New(yarnclient.Config{RMAddrs: rms, User: "demo", Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rm.ClusterMetrics(ctx)
	rm.Close()
	if err != nil || m.GetNumActiveNms() != 2 {
		t.Fatalf("ResourceManager of the written yarn-site.xml: %v NodeManagers (%v)", m.GetNumActiveNms(), err)
	}
	if !strings.Contains(out.String(), "spindle submit --master yarn") {
		t.Errorf("usage does not show a YARN submit:\n%s", out.String())
	}

	res := fsys.NewResolver(fsys.Options{HadoopConfDir: conf})
	fs, _, err := res.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(ctx, "/user/demo/data/part-0.csv")
	if err != nil {
		t.Fatalf("the --put file: %v", err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "x,label\n1,0\n" {
		t.Fatalf("the --put file reads %q", got)
	}
	res.Close()

	stop()
	if err := <-done; err != nil {
		t.Fatalf("minicluster: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hdfs", "namenode", "fsimage.json")); err != nil {
		t.Fatalf("namespace not saved on exit: %v", err)
	}
}

func TestMiniclusterBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--block-size", "huge"}, "--block-size"},
		{[]string{"--put", "nodest"}, "LOCAL_GLOB=HDFS_DIR"},
		{[]string{"--datanodes", "0"}, "--datanodes 0"},
		{[]string{"--nodemanagers", "-1"}, "--nodemanagers -1"},
		{[]string{"--nm-memory", "1MiB"}, "--nm-memory"},
		{[]string{"--datanodes", "2", "--replication", "3"}, "--replication 3"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			app := newApp()
			app.Writer, app.ErrWriter = io.Discard, io.Discard
			args := append([]string{"spindle", "minicluster", "--dir", t.TempDir()}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
			defer cancel()
			err := app.RunContext(ctx, args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestMiniclusterSecureWithoutKerberos: spindle minicluster --secure on a
// machine without MIT Kerberos's programs exits 2 naming the first one
// missing, before starting anything.
func TestMiniclusterSecureWithoutKerberos(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	saved := krbtest.SbinDirs
	krbtest.SbinDirs = nil
	defer func() { krbtest.SbinDirs = saved }()
	dir := t.TempDir()
	app := newApp()
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	err := app.RunContext(ctx, []string{"spindle", "minicluster", "--secure", "--dir", dir})
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), "krb5kdc not found") {
		t.Fatalf("exit %d: %v; want exit %d naming krb5kdc", code, err, exitUsage)
	}
	if _, serr := os.Stat(filepath.Join(dir, "hdfs")); serr == nil {
		t.Fatal("the HDFS was started before the check")
	}
}
