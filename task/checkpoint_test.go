package task

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/task/resume"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// checkpointDirs returns a local directory and an HDFS directory (on a test
// HDFS named by HADOOP_CONF_DIR, with 64 KiB blocks) to run the checkpoint
// tests against.
func checkpointDirs(t *testing.T) map[string]string {
	c := hdfstest.NewTestCluster(t, hdfstest.Config{BlockSize: 64 << 10})
	conf := t.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADOOP_CONF_DIR", conf)
	t.Setenv("HADOOP_USER_NAME", c.Superuser())
	return map[string]string{
		"local": t.TempDir() + "/ckpt",
		"hdfs":  "hdfs:///user/" + c.Superuser() + "/job-1/ckpt",
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	f, d, err := res.Resolve(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := f.ReadDir(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name())
	}
	return names
}

func TestCheckpoints(t *testing.T) {
	for backend, dir := range checkpointDirs(t) {
		t.Run(backend, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
			defer cancel()
			state := make([]byte, 300<<10) // several HDFS blocks
			rand.New(rand.NewSource(1)).Read(state)
			save := func(name string, b []byte) error {
				return SaveCheckpoint(ctx, dir, name, func(w io.Writer) error {
					_, err := w.Write(b)
					return err
				})
			}
			load := func(name string) ([]byte, error) {
				var got []byte
				err := LoadCheckpoint(ctx, dir, name, func(r io.Reader) error {
					var err error
					got, err = io.ReadAll(r)
					return err
				})
				return got, err
			}

			if _, err := LatestCheckpoint(ctx, dir, "step-"); !errors.Is(err, ErrNoCheckpoint) {
				t.Fatalf("latest before any save: %v", err)
			}
			if err := save("step-9", state); err != nil {
				t.Fatal(err)
			}
			got, err := load("step-9")
			if err != nil || !bytes.Equal(got, state) {
				t.Fatalf("load: %d bytes, %v", len(got), err)
			}

			// A failed save leaves the previous checkpoint and no stray file.
			boom := errors.New("out of memory")
			err = SaveCheckpoint(ctx, dir, "step-9", func(w io.Writer) error {
				w.Write(state[:1000])
				return boom
			})
			if !errors.Is(err, boom) || !strings.Contains(err.Error(), "step-9") {
				t.Fatalf("failed save: %v", err)
			}
			if got, _ := load("step-9"); !bytes.Equal(got, state) {
				t.Fatal("a failed save damaged the previous checkpoint")
			}
			// So does a save whose context ends, and one whose writer panics.
			cctx, ccancel := context.WithCancel(ctx)
			err = SaveCheckpoint(cctx, dir, "step-11", func(w io.Writer) error {
				w.Write(state)
				ccancel()
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled save: %v", err)
			}
			func() {
				defer func() { recover() }()
				SaveCheckpoint(ctx, dir, "step-12", func(w io.Writer) error { w.Write(state); panic("bug") })
			}()
			if names := listDir(t, dir); strings.Join(names, ",") != "step-9" {
				t.Fatalf("directory holds %v after failed saves, want only step-9", names)
			}

			// Replacing and picking the latest.
			if err := save("step-9", []byte("new")); err != nil {
				t.Fatal(err)
			}
			if got, _ := load("step-9"); string(got) != "new" {
				t.Fatalf("after replacing: %q", got)
			}
			for _, n := range []string{"step-10", "step-2", "other-99"} {
				if err := save(n, []byte(n)); err != nil {
					t.Fatal(err)
				}
			}
			latest, err := LatestCheckpoint(ctx, dir, "step-")
			if err != nil || latest != "step-10" {
				t.Fatalf("latest: %q, %v", latest, err)
			}

			if _, err := load("step-404"); !errors.Is(err, ErrNoCheckpoint) || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("load missing: %v", err)
			}
		})
	}
}

func TestCheckpointBadInput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, name := range []string{"", ".", "..", "a/b", ".hidden"} {
		err := SaveCheckpoint(ctx, dir, name, func(io.Writer) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "checkpoint name") {
			t.Errorf("save %q: %v", name, err)
		}
	}
	var e Env
	if err := e.SaveCheckpoint(ctx, "x", func(io.Writer) error { return nil }); !errors.Is(err, ErrNoCheckpointDir) {
		t.Fatalf("save without a checkpoint dir: %v", err)
	}
	if _, err := e.LatestCheckpoint(ctx, ""); !errors.Is(err, ErrNoCheckpointDir) {
		t.Fatalf("latest without a checkpoint dir: %v", err)
	}
	e.CheckpointDir = "ftp://host/x"
	if err := e.LoadCheckpoint(ctx, "x", func(io.Reader) error { return nil }); err == nil || !strings.Contains(err.Error(), "ftp://host/x") {
		t.Fatalf("load from an unsupported scheme: %v", err)
	}
}

func TestNaturalOrder(t *testing.T) {
	names := []string{"step-10", "step-9", "step-009", "step-100", "step-2", "step-a", "step-"}
	sort.Slice(names, func(i, j int) bool { return resume.NaturalLess(names[i], names[j]) })
	want := "step-,step-2,step-9,step-009,step-10,step-100,step-a"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
}
