package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// tensorBoardPython returns the Python venv's interpreter when it imports
// tensorboard (make deps installs it into ~/.cache/spindle-py-venv), else "".
func tensorBoardPython(t *testing.T) string {
	venv := os.Getenv("SPINDLE_PY_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-py-venv")
	}
	py := filepath.Join(venv, "bin", "python")
	if out, err := exec.Command(py, "-c", "import tensorboard").CombinedOutput(); err != nil {
		t.Logf("not reading the run with TensorBoard: %s does not import it (make deps installs it): %v %s", py, err, out)
		return ""
	}
	return py
}

// TestTensorBoardOnHDFS: with spindle.tensorboard.dir on HDFS, the driver
// publishes the ranks' reported values into the job's run while it runs
// and the rest when it ends, and TensorBoard reads every value once from
// the run's files.
func TestTensorBoardOnHDFS(t *testing.T) {
	c := hdfstest.NewTestCluster(t, hdfstest.Config{BlockSize: 64 << 10})
	conf := t.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADOOP_CONF_DIR", conf)
	t.Setenv("HADOOP_USER_NAME", c.Superuser())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	dir := "hdfs:///user/" + c.Superuser() + "/tb"
	tb := openTensorBoard(ctx, res, dir, "job-7", 20*time.Millisecond, slog.New(slog.DiscardHandler))
	if tb == nil {
		t.Fatal("no TensorBoard writer for an hdfs:// directory")
	}
	o := &observer{tb: tb, logger: slog.New(slog.DiscardHandler)}
	report := func(rank int, step int64) {
		o.writeScalars(jobview.Event{Time: time.Unix(1000+step, 0), Kind: jobview.KindScalars, Rank: rank, Step: step,
			Values: map[string]float64{"loss": float64(10*rank) + float64(step)}})
	}
	fs, run, err := res.Resolve(ctx, dir+"/job-7")
	if err != nil {
		t.Fatal(err)
	}
	report(0, 0)
	report(1, 0)
	// Published while the job runs, not only at its end.
	testutil.WaitFor(t, 30*time.Second, func() error {
		infos, err := fs.ReadDir(ctx, run)
		if err == nil && len(infos) == 0 {
			err = errors.New("the directory is empty")
		}
		if err != nil {
			return fmt.Errorf("no event file in %s/job-7 while the job runs: %w", dir, err)
		}
		return nil
	})
	report(0, 1)
	report(1, 1)
	if err := tb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	infos, err := fs.ReadDir(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "job-7")
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, fi := range infos {
		if !strings.Contains(fi.Name(), ".tfevents.") {
			t.Errorf("%s in the run is not an event file", fi.Name())
		}
		f, err := fs.Open(ctx, path.Join(run, fi.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(local, fi.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(infos) < 2 {
		t.Fatalf("%d event files, want one published while running and one at the end", len(infos))
	}
	py := tensorBoardPython(t)
	if py == "" {
		return
	}
	script := `
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1]); acc.Reload()
for tag in sorted(acc.Tags()["scalars"]):
    print(tag, " ".join(f"{e.step}={e.value:g}" for e in acc.Scalars(tag)))
`
	out, err := exec.Command(py, "-c", script, local).CombinedOutput()
	if err != nil {
		t.Fatalf("tensorboard could not read the run: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "loss/rank 0 0=0 1=1\nloss/rank 1 0=10 1=11"; got != want {
		t.Fatalf("tensorboard read\n%s\nwant\n%s", got, want)
	}
}
