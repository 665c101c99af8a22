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
		repl       int
	}
	// full records checkpoint name at step s by both ranks of a world of 2,
	// rank 0 with the file.
	full := func(name string, at int) []rec {
		return []rec{{name, 0, 2, 0, at, name, 0}, {name, 1, 2, 0, at, "", 0}}
	}
	// by is full with rank 1's record written by generation gen's
	// replacement'th process.
	by := func(name string, at, gen, replacement int) []rec {
		return []rec{{name, 0, 2, gen, at, name, 0}, {name, 1, 2, gen, at, "", replacement}}
	}
	pin := func(gen, replacement int) *Pin { return &Pin{Rank: 1, Generation: gen, Replacement: replacement} }
	tests := []struct {
		name        string
		recs        []rec
		keep        int
		pins        map[string]*Pin // nil: an unreadable pin
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
			recs: slices.Concat(full("ckpt-10", 1), []rec{{"ckpt-15", 0, 2, 0, 2, "ckpt-15", 0}}, full("ckpt-20", 3)),
			keep: 1, wantRemoved: []string{"ckpt-10"}, wantLeft: []string{"ckpt-15", "ckpt-20"}},
		{name: "recency by completion, not by step: an older job's higher steps go",
			recs: slices.Concat(full("ckpt-900", 1), full("ckpt-910", 2), full("ckpt-10", 3)),
			keep: 1, wantRemoved: []string{"ckpt-900", "ckpt-910"}, wantLeft: []string{"ckpt-10"}},
		{name: "other prefixes are left alone",
			recs: slices.Concat(full("ckpt-10", 1), full("opt-10", 1), full("ckpt-20", 2), full("ckpt-30", 3)),
			keep: 1, wantRemoved: []string{"ckpt-10", "ckpt-20"}, wantLeft: []string{"ckpt-30", "opt-10"}},
		{name: "ranks of different generations make no complete checkpoint",
			recs: slices.Concat([]rec{{"ckpt-10", 0, 2, 0, 1, "ckpt-10", 0}, {"ckpt-10", 1, 2, 1, 1, "", 0}}, full("ckpt-20", 2), full("ckpt-30", 3)),
			keep: 1, wantRemoved: []string{"ckpt-20"}, wantLeft: []string{"ckpt-10", "ckpt-30"}},
		{name: "a checkpoint pinned for a replacement stays while the lost process's records complete newer ones",
			recs: slices.Concat(full("ckpt-10", 1), full("ckpt-20", 2), full("ckpt-30", 3)), pins: map[string]*Pin{"ckpt-10": pin(0, 1)},
			keep: 1, wantRemoved: []string{"ckpt-20"}, wantLeft: []string{"ckpt-10", "ckpt-30"}},
		{name: "the pin is spent once the replacement recorded a newer checkpoint",
			recs: slices.Concat(full("ckpt-10", 1), by("ckpt-20", 2, 0, 1), full("ckpt-30", 3)), pins: map[string]*Pin{"ckpt-10": pin(0, 1)},
			keep: 1, wantRemoved: []string{"ckpt-10", "ckpt-20"}, wantLeft: []string{"ckpt-30"}},
		{name: "an earlier replacement's record does not spend a later one's pin",
			recs: slices.Concat(full("ckpt-10", 1), by("ckpt-20", 2, 0, 1), full("ckpt-30", 3)), pins: map[string]*Pin{"ckpt-10": pin(0, 2)},
			keep: 1, wantRemoved: []string{"ckpt-20"}, wantLeft: []string{"ckpt-10", "ckpt-30"}},
		{name: "a later generation spends the pin",
			recs: slices.Concat(full("ckpt-10", 1), by("ckpt-20", 2, 1, 0), by("ckpt-30", 3, 1, 0)), pins: map[string]*Pin{"ckpt-10": pin(0, 3)},
			keep: 1, wantRemoved: []string{"ckpt-10", "ckpt-20"}, wantLeft: []string{"ckpt-30"}},
		{name: "an unreadable pin is spent by any newer record of its rank",
			recs: slices.Concat(full("ckpt-10", 1), full("ckpt-20", 2)), pins: map[string]*Pin{"ckpt-10": nil},
			keep: 1, wantRemoved: []string{"ckpt-10"}, wantLeft: []string{"ckpt-20"}},
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
					Generation: r.gen, Replacement: r.repl, Files: files, Time: t0.Add(time.Duration(r.at) * time.Second)}); err != nil {
					t.Fatal(err)
				}
			}
			for name, p := range tt.pins {
				if p == nil {
					if err := os.WriteFile(filepath.Join(dir, PinPath(name, 1)), []byte("{"), 0o600); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if ok, err := PinFor(ctx, fsy, dir, name, *p); err != nil || !ok {
					t.Fatalf("PinFor(%s) = %v, %v; want true (complete)", name, ok, err)
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

// TestPinForAGoneCheckpoint: PinFor says false when the checkpoint is no
// longer complete, so the driver chooses again.
func TestPinForAGoneCheckpoint(t *testing.T) {
	ctx := context.Background()
	fsy, dir := localFS(t)
	Write(ctx, fsy, dir, Record{Checkpoint: "ckpt-1", Step: 1, Rank: 0, WorldSize: 2, Time: time.Now()})
	if ok, err := PinFor(ctx, fsy, dir, "ckpt-1", Pin{Rank: 1, Replacement: 1}); err != nil || ok {
		t.Errorf("PinFor(a checkpoint rank 1 has not recorded) = %v, %v; want false", ok, err)
	}
	if ok, err := PinFor(ctx, fsy, dir, "ckpt-2", Pin{Rank: 1, Replacement: 1}); err != nil || ok {
		t.Errorf("PinFor(a pruned checkpoint) = %v, %v; want false", ok, err)
	}
	if _, err := PinFor(ctx, fsy, dir, "../x", Pin{}); err == nil {
		t.Error("PinFor accepted a checkpoint name with a slash")
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
