package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTimeline: with spindle.timeline set, a Go job's feed waits and
// allreduces and a Python job's feed waits and checkpoint saves land in a
// Chrome-trace file, one process per rank.
func TestTimeline(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 4000, 2)
	type event struct {
		Name string `json:"name"`
		Cat  string `json:"cat"`
		Ph   string `json:"ph"`
		PID  int    `json:"pid"`
	}
	readTrace := func(t *testing.T, path string) map[string]map[int]int {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var events []event
		if err := json.Unmarshal(b, &events); err != nil {
			t.Fatalf("%s is not a trace: %v", path, err)
		}
		byCat := map[string]map[int]int{} // category to rank to spans
		for _, e := range events {
			if e.Ph == "X" {
				if byCat[e.Cat] == nil {
					byCat[e.Cat] = map[int]int{}
				}
				byCat[e.Cat][e.PID]++
			}
		}
		return byCat
	}

	t.Run("go", func(t *testing.T) {
		trace := filepath.Join(t.TempDir(), "go.json")
		r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--label-column", "label", "--feed", "tensor",
			"--epochs", "2", "--conf", "spindle.timeline="+trace, "--", logregBin)...)
		if r.code != 0 || !strings.Contains(r.stderr, "timeline written to "+trace) {
			t.Fatalf("job:\n%s", r)
		}
		byCat := readTrace(t, trace)
		for _, cat := range []string{"feed", "collective"} {
			if byCat[cat][0] == 0 || byCat[cat][1] == 0 {
				t.Errorf("%s spans by rank: %v, want some from both ranks", cat, byCat[cat])
			}
		}
	})
	t.Run("python", func(t *testing.T) {
		dir := t.TempDir()
		trace := filepath.Join(dir, "py.json")
		script := filepath.Join(dir, "train.py")
		writeFile(t, script, `
import spindle
from spindle import checkpoint
for epoch in spindle.epochs():
    for batch in epoch:
        pass
checkpoint.save_bytes(b"model", "model-%d" % spindle.rank())
`)
		r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--checkpoint-dir", filepath.Join(dir, "ckpt"),
			"--conf", "spindle.timeline="+trace, "--", "/usr/bin/python3", script)...)
		if r.code != 0 {
			t.Fatalf("job:\n%s", r)
		}
		byCat := readTrace(t, trace)
		if byCat["feed"][0] == 0 || byCat["feed"][1] == 0 || byCat["checkpoint"][0] != 1 || byCat["checkpoint"][1] != 1 {
			t.Errorf("spans by category and rank: %v", byCat)
		}
	})
	t.Run("no directory", func(t *testing.T) {
		r := spindle(t, data, submitArgs("--input", data, "--conf", "spindle.timeline=/nonexistent/dir/t.json", "--", "/bin/true")...)
		if r.code != 2 || !strings.Contains(r.stderr, "spindle.timeline") {
			t.Fatalf("want exit 2 naming spindle.timeline:\n%s", r)
		}
	})
}
