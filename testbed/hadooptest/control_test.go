package hadooptest

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestControl stops and restarts a datanode and stops a NodeManager of a
// private cluster through the launcher's control commands; HDFS keeps
// serving a file written before, from its other replica.
func TestControl(t *testing.T) {
	c := Private(t, 2, 2)
	nms, err := c.NodeManagers()
	if err != nil || len(nms) != 2 || nms[0].Down || nms[1].Down {
		t.Fatalf("NodeManagers: %+v, %v; want two running", nms, err)
	}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: c.ConfDir})
	defer res.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	fs, name, err := res.Resolve(ctx, "hdfs:///control/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll(ctx, "/control"); err != nil {
		t.Fatal(err)
	}
	w, err := fs.CreateAtomic(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("spindle ", 1000)
	io.WriteString(w, want)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.StopDataNode(0); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(got) != want {
		t.Fatalf("read with datanode 0 stopped: %d bytes, %v", len(got), err)
	}
	if err := c.RestartDataNode(0); err != nil {
		t.Fatal(err)
	}
	if err := c.StopNodeManager(1); err != nil {
		t.Fatal(err)
	}
	if nms, err = c.NodeManagers(); err != nil || !nms[1].Down || nms[0].Down {
		t.Fatalf("after stopping NodeManager 1: %+v, %v", nms, err)
	}
	if err := c.StopDataNode(7); err == nil || !strings.Contains(err.Error(), "stop-datanode 7") {
		t.Fatalf("stopping a datanode that is not there: %v, want an error naming the command", err)
	}
}
