package task

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/task/resume"
)

// consumer takes batches one at a time across epochs, as a training loop does.
type consumer struct {
	env    Env
	tensor *wire.TensorEpoch
	arrow  *wire.ArrowEpoch
	epoch  int
}

// next returns the epoch and row numbers (column y) of the next batch,
// opening epochs as needed; ok is false at the end of the feed.
func (c *consumer) next(ctx context.Context, t *testing.T) (epoch int, rows []int, ok bool) {
	t.Helper()
	for {
		if c.tensor == nil && c.arrow == nil {
			var err error
			if c.env.FeedMode == wire.ModeTensor {
				c.tensor, err = c.env.Tensors(ctx)
				if err == nil {
					c.epoch = c.tensor.Epoch()
				}
			} else {
				c.arrow, err = c.env.Batches(ctx)
				if err == nil {
					c.epoch = c.arrow.Epoch()
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.epoch < 0 {
				c.close()
				return -1, nil, false
			}
		}
		var err error
		if c.tensor != nil {
			var b wire.TensorBatch
			if b, err = c.tensor.Next(ctx); err == nil {
				for _, y := range b.Labels {
					rows = append(rows, int(y))
				}
			}
		} else {
			rec, e := c.arrow.Next(ctx)
			if err = e; err == nil {
				for _, y := range rec.Column(1).(*array.Float32).Float32Values() {
					rows = append(rows, int(y))
				}
				rec.Release()
			}
		}
		if errors.Is(err, io.EOF) {
			c.close()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return c.epoch, rows, true
	}
}

func (c *consumer) close() {
	if c.tensor != nil {
		c.tensor.Close()
	}
	if c.arrow != nil {
		c.arrow.Close()
	}
	c.tensor, c.arrow = nil, nil
}

// TestCheckpointerResumesTheFeed: a process saves a checkpoint after k
// batches, takes one batch more and dies; the next generation, started
// where the checkpoint's record says and loading it, sees the rest, so
// that every row of every epoch is taken exactly once counting what the
// checkpoint had consumed.
func TestCheckpointerResumesTheFeed(t *testing.T) {
	const epochs, batches, rows = 3, 5, 4
	for _, mode := range []wire.Mode{wire.ModeArrow, wire.ModeTensor} {
		for _, k := range []int{0, 1, 4, 5, 7, 14} {
			t.Run(fmt.Sprintf("%s/after%d", mode, k), func(t *testing.T) {
				ctx := testCtx(t)
				ckdir := t.TempDir()
				src := source{nBatches: batches, rows: rows}

				// Generation 0.
				position = feedTracker{}
				env := serve(t, mode, epochs, src)
				env.CheckpointDir = ckdir
				c, err := env.Checkpointer(CheckpointOptions{Prefix: "step"})
				if err != nil {
					t.Fatal(err)
				}
				con := &consumer{env: env}
				committed := map[int][]int{}
				for range k {
					e, r, ok := con.next(ctx, t)
					if !ok {
						t.Fatal("the feed ended early")
					}
					committed[e] = append(committed[e], r...)
				}
				state := fmt.Sprint(committed)
				if err := c.Save(ctx, int64(k), func(w io.Writer) error { _, err := io.WriteString(w, state); return err }); err != nil {
					t.Fatal(err)
				}
				con.next(ctx, t) // taken after the checkpoint: lost with the process
				con.close()

				// The driver's choice.
				res := fsys.NewResolver(fsys.Options{})
				defer res.Close()
				fsy, d, err := res.Resolve(ctx, ckdir)
				if err != nil {
					t.Fatal(err)
				}
				p, _, err := resume.Latest(ctx, fsy, d, 1, []bool{true}, time.Time{})
				if err != nil || p == nil {
					t.Fatalf("no complete checkpoint: %v", err)
				}
				pos := p.Feed[0]
				// After a whole epoch without its end seen, the position is
				// at that epoch's end, which is the next one's start.
				want := resume.Position{Epoch: k / batches, Batches: int64(k % batches)}
				if at := (resume.Position{Epoch: want.Epoch - 1, Batches: batches}); k > 0 && k%batches == 0 && *pos == at {
					want = at
				}
				if *pos != want {
					t.Errorf("recorded position %v, want %v", pos, want)
				}

				// Generation 1.
				position = feedTracker{}
				env = serveFrom(t, mode, epochs, src, pos.Epoch, pos.Batches)
				env.CheckpointDir, env.ResumeCheckpoint, env.ResumeStep, env.Generation = ckdir, p.Checkpoint, p.Step, 1
				c, err = env.Checkpointer(CheckpointOptions{Prefix: "step"})
				if err != nil {
					t.Fatal(err)
				}
				var loaded string
				step, ok, err := c.Resume(ctx, func(r io.Reader) error {
					b, err := io.ReadAll(r)
					loaded = string(b)
					return err
				})
				if err != nil || !ok || step != int64(k) || loaded != state {
					t.Fatalf("resume: step %d ok %v err %v state %q, want step %d state %q", step, ok, err, loaded, k, state)
				}
				con = &consumer{env: env}
				for {
					e, r, ok := con.next(ctx, t)
					if !ok {
						break
					}
					committed[e] = append(committed[e], r...)
				}
				for e := range epochs {
					got := slices.Sorted(slices.Values(committed[e]))
					want := make([]int, batches*rows)
					for i := range want {
						want[i] = i
					}
					if !slices.Equal(got, want) {
						t.Errorf("epoch %d took rows %v, want each of 0..%d once", e, got, batches*rows-1)
					}
				}
			})
		}
	}
}

func TestCheckpointerNamesAndBadUse(t *testing.T) {
	ctx := testCtx(t)
	if _, err := (Env{}).Checkpointer(CheckpointOptions{}); !errors.Is(err, ErrNoCheckpointDir) {
		t.Fatalf("no checkpoint dir: %v", err)
	}
	env := Env{WorldSize: 2, Rank: 1, CheckpointDir: t.TempDir()}
	if _, err := env.Checkpointer(CheckpointOptions{Prefix: ".x"}); err == nil {
		t.Fatal("a hidden prefix was accepted")
	}
	c, err := env.Checkpointer(CheckpointOptions{PerRank: true, EverySteps: 10})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name(20) != "ckpt-20" || c.file(20) != "ckpt-20.rank-1" {
		t.Errorf("names %s %s", c.Name(20), c.file(20))
	}
	if c.Due(9) || !c.Due(10) {
		t.Errorf("due at 9 or not at 10")
	}
	env.ResumeCheckpoint, env.ResumeStep = "model-20", 20
	c, _ = env.Checkpointer(CheckpointOptions{})
	if _, _, err := c.Resume(ctx, func(io.Reader) error { return nil }); err == nil || !strings.Contains(err.Error(), "model-20") {
		t.Fatalf("resume from another prefix's checkpoint: %v", err)
	}
	// Rank 1 without PerRank records its position but writes no file.
	c, _ = (Env{WorldSize: 2, Rank: 1, CheckpointDir: env.CheckpointDir}).Checkpointer(CheckpointOptions{})
	called := false
	if err := c.Save(ctx, 3, func(io.Writer) error { called = true; return nil }); err != nil || called {
		t.Fatalf("rank 1 save: err %v, wrote %v", err, called)
	}
	if err := LoadCheckpoint(ctx, env.CheckpointDir, "ckpt-3", func(io.Reader) error { return nil }); err == nil {
		t.Fatal("rank 1 wrote the checkpoint file")
	}
}

// TestCheckpointerKeeps: with Keep 2, once a checkpoint is complete the
// rank whose record completed it deletes the complete checkpoints beyond
// the two newest, files and records; a checkpoint one rank has not
// recorded yet is neither deleted nor counted; Keep -1 and a job keep of 0
// delete nothing.
func TestCheckpointerKeeps(t *testing.T) {
	ctx := testCtx(t)
	model := func(step int64) func(io.Writer) error {
		return func(w io.Writer) error { _, err := fmt.Fprintf(w, "model %d", step); return err }
	}
	tests := []struct {
		name     string
		jobKeep  int
		keep     int
		perRank  bool
		wantLeft []string // after steps 1-5 and rank 0's half of 6
	}{
		{name: "keep 2", keep: 2, wantLeft: []string{"ckpt-4", "ckpt-5", "ckpt-6"}},
		{name: "the job's keep", jobKeep: 3, wantLeft: []string{"ckpt-3", "ckpt-4", "ckpt-5", "ckpt-6"}},
		{name: "per-rank files", keep: 1, perRank: true,
			wantLeft: []string{"ckpt-5.rank-0", "ckpt-5.rank-1", "ckpt-6.rank-0"}},
		{name: "keep every one", jobKeep: 2, keep: -1,
			wantLeft: []string{"ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4", "ckpt-5", "ckpt-6"}},
		{name: "job keeps every one", jobKeep: 0,
			wantLeft: []string{"ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4", "ckpt-5", "ckpt-6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var cks [2]*Checkpointer
			for r := range cks {
				c, err := (Env{WorldSize: 2, Rank: r, CheckpointDir: dir, CheckpointKeep: tt.jobKeep}).Checkpointer(
					CheckpointOptions{Keep: tt.keep, PerRank: tt.perRank})
				if err != nil {
					t.Fatal(err)
				}
				cks[r] = c
			}
			for step := int64(1); step <= 5; step++ {
				// Either rank may be the last to record.
				order := []int{0, 1}
				if step%2 == 0 {
					order = []int{1, 0}
				}
				for _, r := range order {
					if err := cks[r].Save(ctx, step, model(step)); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Rank 0 saved step 6; rank 1 has not yet.
			if err := cks[0].Save(ctx, 6, model(6)); err != nil {
				t.Fatal(err)
			}
			if got := checkpointFiles(t, dir); !slices.Equal(got, tt.wantLeft) {
				t.Fatalf("checkpoint files %v, want %v", got, tt.wantLeft)
			}
			// The newest complete checkpoint is still whole: the driver can resume from it.
			last := "ckpt-5"
			if tt.perRank {
				last = "ckpt-5.rank-1"
			}
			if err := LoadCheckpoint(ctx, dir, last, func(r io.Reader) error {
				b, _ := io.ReadAll(r)
				if string(b) != "model 5" {
					return fmt.Errorf("holds %q", b)
				}
				return nil
			}); err != nil {
				t.Fatalf("load %s: %v", last, err)
			}
			p, _, err := resumeLatest(ctx, dir)
			if err != nil || p != "ckpt-5" {
				t.Fatalf("latest complete checkpoint %q (%v), want ckpt-5", p, err)
			}
		})
	}
}

// checkpointFiles lists the checkpoint files in dir (not the records).
// TestCheckpointerKeepsAReplacementsCheckpoint: the checkpoint the driver
// pinned for rank 1's replacement stays while the lost process's records
// complete newer ones, and goes once the replacement's own Save records a
// newer one.
func TestCheckpointerKeepsAReplacementsCheckpoint(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	model := func(w io.Writer) error { _, err := io.WriteString(w, "model"); return err }
	save := func(replacement int, steps ...int64) {
		t.Helper()
		for _, step := range steps {
			for r := range 2 {
				e := Env{WorldSize: 2, Rank: r, CheckpointDir: dir}
				if r == 1 {
					e.Replacement = replacement
				}
				c, err := e.Checkpointer(CheckpointOptions{Keep: 1})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Save(ctx, step, model); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	save(0, 1)
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	fsy, d, err := res.Resolve(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := resume.PinFor(ctx, fsy, d, "ckpt-1", resume.Pin{Rank: 1, Replacement: 1}); err != nil || !ok {
		t.Fatalf("pin ckpt-1: %v, %v", ok, err)
	}
	save(0, 2, 3)
	if got, want := checkpointFiles(t, dir), []string{"ckpt-1", "ckpt-3"}; !slices.Equal(got, want) {
		t.Fatalf("while pinned: checkpoint files %v, want %v", got, want)
	}
	save(1, 4)
	if got, want := checkpointFiles(t, dir), []string{"ckpt-4"}; !slices.Equal(got, want) {
		t.Fatalf("once the replacement saved: checkpoint files %v, want %v", got, want)
	}
}

func checkpointFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if resume.NaturalLess(a, b) {
			return -1
		}
		return 1
	})
	return out
}

// resumeLatest returns the checkpoint a driver would resume a world of 2
// fed ranks from.
func resumeLatest(ctx context.Context, dir string) (string, []string, error) {
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	fsy, d, err := res.Resolve(ctx, dir)
	if err != nil {
		return "", nil, err
	}
	p, skipped, err := resume.Latest(ctx, fsy, d, 2, []bool{true, true}, time.Time{})
	if err != nil || p == nil {
		return "", skipped, err
	}
	return p.Checkpoint, skipped, nil
}
