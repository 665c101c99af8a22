package resume

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
)

func localFS(t *testing.T) (fsys.FS, string) {
	t.Helper()
	res := fsys.NewResolver(fsys.Options{})
	t.Cleanup(func() { res.Close() })
	dir := t.TempDir()
	fsy, d, err := res.Resolve(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return fsy, d
}

func TestLatest(t *testing.T) {
	pos := func(e int, b int64) *Position { return &Position{Epoch: e, Batches: b} }
	type rec struct {
		name       string
		rank, size int
		step       int64
		feed       *Position
	}
	tests := []struct {
		name     string
		recs     []rec
		fed      []bool
		want     string // checkpoint chosen, "" for none
		wantFeed []*Position
		skipped  int
	}{
		{name: "none", fed: []bool{true, true}},
		{name: "newest complete", fed: []bool{true, true},
			recs: []rec{{"ckpt-9", 0, 2, 9, pos(0, 9)}, {"ckpt-9", 1, 2, 9, pos(0, 9)}, {"ckpt-10", 0, 2, 10, pos(1, 0)}, {"ckpt-10", 1, 2, 10, pos(1, 0)}},
			want: "ckpt-10", wantFeed: []*Position{pos(1, 0), pos(1, 0)}},
		{name: "a rank that did not finish", fed: []bool{true, true},
			recs: []rec{{"ckpt-9", 0, 2, 9, pos(0, 9)}, {"ckpt-9", 1, 2, 9, pos(0, 8)}, {"ckpt-10", 0, 2, 10, pos(1, 0)}},
			want: "ckpt-9", wantFeed: []*Position{pos(0, 9), pos(0, 8)}, skipped: 1},
		{name: "a rank that is not fed need not record", fed: []bool{true, false},
			recs: []rec{{"ckpt-3", 0, 2, 3, pos(0, 3)}},
			want: "ckpt-3", wantFeed: []*Position{pos(0, 3), nil}},
		{name: "nothing fed: every rank must record", fed: []bool{false, false},
			recs: []rec{{"ckpt-3", 0, 2, 3, nil}}, skipped: 1},
		{name: "another world size", fed: []bool{true},
			recs: []rec{{"ckpt-3", 0, 2, 3, pos(0, 3)}}, skipped: 1},
		{name: "steps disagree", fed: []bool{true, true},
			recs: []rec{{"ckpt-3", 0, 2, 3, pos(0, 3)}, {"ckpt-3", 1, 2, 4, pos(0, 4)}}, skipped: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			fsy, dir := localFS(t)
			for _, r := range tt.recs {
				if err := Write(ctx, fsy, dir, Record{Checkpoint: r.name, Step: r.step, Rank: r.rank, WorldSize: r.size, Feed: r.feed}); err != nil {
					t.Fatal(err)
				}
			}
			// A save in progress is never read.
			if err := os.MkdirAll(filepath.Join(dir, Dir, "ckpt-99"), 0o755); err == nil {
				os.WriteFile(filepath.Join(dir, Dir, "ckpt-99", ".rank-0.json.tmp"), []byte("{"), 0o644)
			}
			p, skipped, err := Latest(ctx, fsy, dir, len(tt.fed), tt.fed, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if p != nil {
					t.Fatalf("chose %s, want none", p.Checkpoint)
				}
			} else {
				if p == nil || p.Checkpoint != tt.want {
					t.Fatalf("chose %+v, want %s (skipped %v)", p, tt.want, skipped)
				}
				for r, w := range tt.wantFeed {
					g := p.Feed[r]
					if (g == nil) != (w == nil) || (g != nil && *g != *w) {
						t.Errorf("rank %d position %v, want %v", r, g, w)
					}
				}
			}
			// ckpt-99 has no records at all: skipped too when listed.
			if got := len(skipped) - 1; tt.recs != nil && got != tt.skipped {
				t.Errorf("skipped %v, want %d besides ckpt-99", skipped, tt.skipped)
			}
		})
	}
}

func TestCheckSettings(t *testing.T) {
	ctx := context.Background()
	fsy, dir := localFS(t)
	s := Settings{Ranks: 2, TotalRows: 100, BatchRows: 10, Shuffle: true, Seed: 7}
	for i, tt := range []struct {
		s    Settings
		want bool
	}{{s, true}, {s, true}, {Settings{Ranks: 3, TotalRows: 100, BatchRows: 10, Shuffle: true, Seed: 7}, false}} {
		ok, why, err := CheckSettings(ctx, fsy, dir, tt.s)
		if err != nil || ok != tt.want {
			t.Fatalf("check %d: ok=%v why=%q err=%v, want ok=%v", i, ok, why, err, tt.want)
		}
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"ckpt-10": true, "model_v2.step-3": true, ".hidden": false, "a/b": false, "": false, "a b": false} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// TestLatestAnyWorld: an elastic job's checkpoints are judged against the
// world that recorded them.
func TestLatestAnyWorld(t *testing.T) {
	ctx := context.Background()
	fsy, dir := localFS(t)
	for _, r := range []Record{
		{Checkpoint: "c-5", Step: 5, Rank: 0, WorldSize: 3, Feed: &Position{Epoch: 1, Batches: 2}},
		{Checkpoint: "c-5", Step: 5, Rank: 1, WorldSize: 3, Feed: &Position{Epoch: 1, Batches: 2}},
		{Checkpoint: "c-5", Step: 5, Rank: 2, WorldSize: 3, Feed: &Position{Epoch: 1, Batches: 2}},
		{Checkpoint: "c-7", Step: 7, Rank: 0, WorldSize: 2, Generation: 1, Feed: &Position{Epoch: 1, Batches: 4}},
		{Checkpoint: "c-6", Step: 6, Rank: 0, WorldSize: 2, Generation: 1},
		{Checkpoint: "c-6", Step: 6, Rank: 1, WorldSize: 2, Generation: 2},
	} {
		if err := Write(ctx, fsy, dir, r); err != nil {
			t.Fatal(err)
		}
	}
	p, skipped, err := Latest(ctx, fsy, dir, 0, nil, time.Time{})
	if err != nil || p == nil || p.Checkpoint != "c-5" || p.World != 3 || len(p.Feed) != 3 || p.Feed[2].Batches != 2 {
		t.Fatalf("chose %+v (err %v), want c-5 of a world of 3", p, err)
	}
	if len(skipped) != 2 {
		t.Errorf("skipped %v, want c-7 (rank 1 missing) and c-6 (two generations)", skipped)
	}
}
