package resume

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type rec struct {
		name       string
		rank, size int
		gen        int
		at         int // seconds after t0
		file       string
	}
	// full records checkpoint name at step s by both ranks of a world of 2,
	// rank 0 with the file.
	full := func(name string, at int) []rec {
		return []rec{{name, 0, 2, 0, at, name}, {name, 1, 2, 0, at, ""}}
	}
	tests := []struct {
		name        string
		recs        []rec
		keep        int
		wantRemoved []string
		wantLeft    []string // checkpoints with records left, sorted
	}{
		{name: "keeps the newest", recs: slices.Concat(full("ckpt-10", 1), full("ckpt-20", 2), full("ckpt-30", 3), full("ckpt-40", 4)),
			keep: 2, wantRemoved: []string{"ckpt-10", "ckpt-20"}, wantLeft: []string{"ckpt-30", "ckpt-40"}},
		{name: "nothing beyond keep", recs: slices.Concat(full("ckpt-10", 1), full("ckpt-20", 2)),
			keep: 3, wantLeft: []string{"ckpt-10", "ckpt-20"}},
		{name: "keep 0 keeps everything", recs: slices.Concat(full("ckpt-10", 1), full("ckpt-20", 2)),
			keep: 0, wantLeft: []string{"ckpt-10", "ckpt-20"}},
		{name: "a partial checkpoint is never deleted nor counted",
			recs: slices.Concat(full("ckpt-10", 1), []rec{{"ckpt-15", 0, 2, 0, 2, "ckpt-15"}}, full("ckpt-20", 3)),
			keep: 1, wantRemoved: []string{"ckpt-10"}, wantLeft: []string{"ckpt-15", "ckpt-20"}},
		{name: "recency by completion, not by step: an older job's higher steps go",
			recs: slices.Concat(full("ckpt-900", 1), full("ckpt-910", 2), full("ckpt-10", 3)),
			keep: 1, wantRemoved: []string{"ckpt-900", "ckpt-910"}, wantLeft: []string{"ckpt-10"}},
		{name: "other prefixes are left alone",
			recs: slices.Concat(full("ckpt-10", 1), full("opt-10", 1), full("ckpt-20", 2), full("ckpt-30", 3)),
			keep: 1, wantRemoved: []string{"ckpt-10", "ckpt-20"}, wantLeft: []string{"ckpt-30", "opt-10"}},
		{name: "ranks of different generations make no complete checkpoint",
			recs: slices.Concat([]rec{{"ckpt-10", 0, 2, 0, 1, "ckpt-10"}, {"ckpt-10", 1, 2, 1, 1, ""}}, full("ckpt-20", 2), full("ckpt-30", 3)),
			keep: 1, wantRemoved: []string{"ckpt-20"}, wantLeft: []string{"ckpt-10", "ckpt-30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			fsy, dir := localFS(t)
			for _, r := range tt.recs {
				var files []string
				if r.file != "" {
					if err := os.WriteFile(filepath.Join(dir, r.file), []byte("model"), 0o644); err != nil {
						t.Fatal(err)
					}
					files = []string{r.file}
				}
				if err := Write(ctx, fsy, dir, Record{Checkpoint: r.name, Step: 1, Rank: r.rank, WorldSize: r.size,
					Generation: r.gen, Files: files, Time: t0.Add(time.Duration(r.at) * time.Second)}); err != nil {
					t.Fatal(err)
				}
			}
			prefix := "ckpt"
			removed, err := Prune(ctx, fsy, dir, prefix, tt.keep)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(removed, tt.wantRemoved) {
				t.Errorf("removed %v, want %v", removed, tt.wantRemoved)
			}
			var left []string
			ents, _ := os.ReadDir(filepath.Join(dir, Dir))
			for _, e := range ents {
				left = append(left, e.Name())
			}
			if !slices.Equal(left, tt.wantLeft) {
				t.Errorf("records left of %v, want %v", left, tt.wantLeft)
			}
			for _, r := range tt.recs {
				if r.file == "" {
					continue
				}
				_, err := os.Stat(filepath.Join(dir, r.file))
				if gone := slices.Contains(tt.wantRemoved, r.name); gone != os.IsNotExist(err) {
					t.Errorf("file %s: removed=%v, stat: %v", r.file, gone, err)
				}
			}
			// Pruning again (another rank at the same time) finds nothing more.
			if again, err := Prune(ctx, fsy, dir, prefix, tt.keep); err != nil || len(again) != 0 {
				t.Errorf("second prune removed %v (%v)", again, err)
			}
		})
	}
}

func TestComplete(t *testing.T) {
	ctx := context.Background()
	fsy, dir := localFS(t)
	Write(ctx, fsy, dir, Record{Checkpoint: "ckpt-1", Step: 1, Rank: 0, WorldSize: 2, Time: time.Now()})
	for _, tt := range []struct {
		name string
		want bool
	}{{"ckpt-1", false}, {"ckpt-2", false}} {
		if got, err := Complete(ctx, fsy, dir, tt.name); err != nil || got != tt.want {
			t.Errorf("Complete(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	Write(ctx, fsy, dir, Record{Checkpoint: "ckpt-1", Step: 1, Rank: 1, WorldSize: 2, Time: time.Now()})
	if got, err := Complete(ctx, fsy, dir, "ckpt-1"); err != nil || !got {
		t.Errorf("Complete(ckpt-1) with both records = %v, %v", got, err)
	}
}
