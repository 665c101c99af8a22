package resume

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestNextGeneration: one past the highest generation any record names,
// half-done checkpoints included; saves in progress and unreadable
// records name none.
func TestNextGeneration(t *testing.T) {
	ctx := context.Background()
	fsy, dir := localFS(t)
	next := func() int {
		t.Helper()
		n, err := NextGeneration(ctx, fsy, dir)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := next(); n != 0 {
		t.Fatalf("an empty directory: %d, want 0", n)
	}
	for _, r := range []Record{
		{Checkpoint: "c-5", Step: 5, Rank: 0, WorldSize: 2},
		{Checkpoint: "c-5", Step: 5, Rank: 1, WorldSize: 2},
		{Checkpoint: "c-10", Step: 10, Rank: 1, WorldSize: 2, Generation: 2}, // half done
	} {
		if err := Write(ctx, fsy, dir, r); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, Dir, "c-10", ".rank-0.json.tmp"), []byte(`{"generation": 9}`), 0o644)
	os.WriteFile(filepath.Join(dir, Dir, "c-10", "rank-0.json"), []byte(`{"generation": `), 0o644)
	if n := next(); n != 3 {
		t.Errorf("records of generations 0 and 2: %d, want 3", n)
	}
}
