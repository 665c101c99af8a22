package eventlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// logDirs returns a local directory and one on a test HDFS to run the
// event log against.
func logDirs(t *testing.T) map[string]string {
	c := hdfstest.NewTestCluster(t, hdfstest.Config{BlockSize: 64 << 10})
	conf := t.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADOOP_CONF_DIR", conf)
	t.Setenv("HADOOP_USER_NAME", c.Superuser())
	return map[string]string{
		"local": filepath.Join(t.TempDir(), "events"),
		"hdfs":  "hdfs:///user/" + c.Superuser() + "/spindle-events",
	}
}

func TestWriterPublishesSegmentsThenFolds(t *testing.T) {
	for name, dir := range logDirs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			res := fsys.NewResolver(fsys.Options{})
			defer res.Close()
			w, err := NewWriter(ctx, res, dir, "job-1", time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
			w.Record(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-1", Name: "demo"}})
			w.Record(jobview.Event{Time: t0, Kind: jobview.KindLog, Rank: 0, Stream: "stdout", Line: "kept"})
			w.Record(jobview.Event{Time: t0.Add(time.Second), Kind: jobview.KindJobState, State: jobview.StateRunning})
			// A job's end is published at once, without waiting for the hour-long tick.
			w.Record(jobview.Event{Time: t0.Add(2 * time.Second), Kind: jobview.KindJobState, State: jobview.StateFailed, Reason: "rank 1 exited 3"})
			var events []jobview.Event
			testutil.WaitFor(t, 10*time.Second, func() error {
				if events, err = Read(ctx, res, dir, "job-1"); err == nil && len(events) != 4 {
					err = fmt.Errorf("%d events, want 4", len(events))
				}
				return err
			})
			if events[1].Line != "kept" {
				t.Fatalf("running job's log holds %d events (err %v), want 4 from its first segment", len(events), err)
			}
			jobs, err := List(ctx, res, dir)
			if err != nil || len(jobs) != 1 || jobs[0].ID != "job-1" || jobs[0].Complete {
				t.Fatalf("list while running: %+v, %v", jobs, err)
			}
			w.Record(jobview.Event{Time: t0.Add(3 * time.Second), Kind: jobview.KindScalars, Values: map[string]float64{"loss": 0.25}})
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			events, err = Read(ctx, res, dir, "job-1")
			if err != nil || len(events) != 5 {
				t.Fatalf("after close: %d events, %v", len(events), err)
			}
			s := jobview.Replay(events).Snapshot(time.Now())
			if s.Name != "demo" || s.State != jobview.StateFailed || s.Reason != "rank 1 exited 3" {
				t.Errorf("replayed %+v", s.Summary)
			}
			jobs, _ = List(ctx, res, dir)
			if len(jobs) != 1 || !jobs[0].Complete {
				t.Errorf("list after close: %+v", jobs)
			}
			f, d, _ := res.Resolve(ctx, dir)
			infos, _ := f.ReadDir(ctx, d+"/job-1")
			var names []string
			for _, fi := range infos {
				names = append(names, fi.Name())
			}
			if len(names) != 2 || names[0] != completeName || names[1] != summaryName {
				t.Errorf("job directory holds %v, want only %s and %s", names, completeName, summaryName)
			}
			// A history lists the finished job from its summary.
			sum, ok, err := ReadSummary(ctx, res, dir, "job-1")
			if err != nil || !ok || sum.Name != "demo" || sum.State != jobview.StateFailed || sum.Duration != 2 {
				t.Errorf("summary %+v, %v, %v; want demo, FAILED after 2 s", sum, ok, err)
			}
		})
	}
}

func TestReadNamesTheBadLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "j"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := `{"kind":"submitted","time":"2026-11-24T09:00:00Z"}` + "\n{not json\n"
	if err := os.WriteFile(filepath.Join(dir, "j", completeName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	_, err := Read(context.Background(), res, dir, "j")
	if err == nil || !strings.Contains(err.Error(), "events.jsonl line 2") {
		t.Fatalf("err %v, want one naming the file and line 2", err)
	}
}

func TestWriterRefusesAJobIDThatIsAPath(t *testing.T) {
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	for _, id := range []string{"", "..", "a/b"} {
		if _, err := NewWriter(context.Background(), res, t.TempDir(), id, 0, nil); err == nil {
			t.Errorf("job id %q accepted", id)
		}
	}
}

// TestLogLinesBounded: a chatty rank's stream keeps its first lines and a
// note; other streams keep theirs.
func TestLogLinesBounded(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	dir := t.TempDir()
	w, err := NewWriter(ctx, res, dir, "chatty", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < MaxLogLines+50; i++ {
		w.Record(jobview.Event{Kind: jobview.KindLog, Rank: 1, Stream: "stdout", Line: "spam"})
	}
	w.Record(jobview.Event{Kind: jobview.KindLog, Rank: 1, Stream: "stderr", Line: "the error"})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	events, err := Read(ctx, res, dir, "chatty")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != MaxLogLines+2 {
		t.Fatalf("%d events, want %d", len(events), MaxLogLines+2)
	}
	if note := events[MaxLogLines].Line; !strings.Contains(note, "first 20000 lines") {
		t.Errorf("no note where the stream was cut: %q", note)
	}
	if last := events[len(events)-1]; last.Stream != "stderr" || last.Line != "the error" {
		t.Errorf("another stream's line was lost: %+v", last)
	}
}
