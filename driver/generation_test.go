package driver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/task"
)

// TestLaterDriverKeepsTheCheckpointItResumes replays what YARN's second
// application attempt met under load: the first attempt's driver died
// while its rank 1 ran three checkpoints ahead of rank 0; the second
// attempt's driver resumes both ranks from rows-20, the newest complete
// checkpoint, and its rank 0 starts and saves rows-25 to rows-35 before
// its rank 1 has loaded rows-20. Had the new gang the first one's
// generation, rank 0's records would complete the first gang's half-done
// rows-25 to rows-35, and keeping the newest three it would delete
// rows-20: rank 1 would find no checkpoint to load, and rowcheck, taking
// that for a rank an elastic job grew by, lost the rows rank 1 had taken
// before it.
func TestLaterDriverKeepsTheCheckpointItResumes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	state := func(step int64) string { return fmt.Sprintf("state of step %d\n", step) }
	rank := func(gen, r int, from string, step int64) *task.Checkpointer {
		env := task.Env{Rank: r, WorldSize: 2, Generation: gen, Feed: "feed.sock", CheckpointDir: dir, CheckpointKeep: 3,
			ResumeCheckpoint: from, ResumeStep: step}
		ck, err := env.Checkpointer(task.CheckpointOptions{Prefix: "rows", EverySteps: 5, PerRank: true})
		if err != nil {
			t.Fatal(err)
		}
		return ck
	}
	save := func(ck *task.Checkpointer, steps ...int64) {
		t.Helper()
		for _, s := range steps {
			if err := ck.Save(ctx, s, func(w io.Writer) error { _, err := io.WriteString(w, state(s)); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first driver's gang, generation 0 of that driver.
	save(rank(0, 0, "", 0), 5, 10, 15, 20)
	save(rank(0, 1, "", 0), 5, 10, 15, 20, 25, 30, 35)

	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	d := &Driver{cfg: Config{CheckpointDir: dir, NumExecutors: 2, BatchRows: 10, Inputs: []string{"ids.csv"}},
		res: res, logger: slog.New(slog.DiscardHandler)}
	var err error
	if d.resumer, err = d.newResumer(ctx, &feed.JobPlan{TotalRows: 4000}, 200, time.Now()); err != nil {
		t.Fatal(err)
	}
	from, err := d.resumeFrom(ctx, layout(d.cfg.Roles()))
	if err != nil {
		t.Fatal(err)
	}
	if from == nil || from.checkpoint != "rows-20" {
		t.Fatalf("the second driver resumes from %+v, want rows-20", from)
	}
	gen := d.firstGeneration()
	if gen == 0 {
		t.Errorf("the second driver's first generation is 0, the number of the gang that wrote %s before", dir)
	}

	// The second driver's rank 0 runs ahead of its rank 1.
	r0 := rank(gen, 0, from.checkpoint, from.step)
	load := func(ck *task.Checkpointer) string {
		t.Helper()
		var b strings.Builder
		step, ok, err := ck.Resume(ctx, func(r io.Reader) error { _, err := io.Copy(&b, r); return err })
		if err != nil || !ok || step != 20 {
			t.Fatalf("resume from %s: step %d, resumed %t, err %v", from.checkpoint, step, ok, err)
		}
		return b.String()
	}
	if got := load(r0); got != state(20) {
		t.Fatalf("rank 0 loaded %q, want %q", got, state(20))
	}
	save(r0, 25, 30, 35)
	if got := load(rank(gen, 1, from.checkpoint, from.step)); got != state(20) {
		t.Errorf("rank 1 loaded %q, want %q", got, state(20))
	}
}
