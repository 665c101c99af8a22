package driver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// TestTraceWriter: spans become complete events of a process per rank and
// a thread per category, in a JSON array that replaces the file at Close.
func TestTraceWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeline.json")
	if err := os.WriteFile(path, []byte("an older timeline"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := newTraceWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	w.add(0, "worker", []*driverpb.Span{{Name: "next batch", Cat: "feed", StartMicros: 1000, DurationMicros: 50}})
	w.add(1, "worker", []*driverpb.Span{{Name: "allreduce", Cat: "collective", StartMicros: 1100, DurationMicros: 0}})
	if b, _ := os.ReadFile(path); string(b) != "an older timeline" {
		t.Fatal("the timeline was replaced before the job ended")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var events []traceEvent
	if err := json.Unmarshal(b, &events); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, b)
	}
	var spans, names, threads int
	for _, ev := range events {
		switch {
		case ev.Ph == "X":
			spans++
			if ev.Dur < 1 {
				t.Errorf("span %+v has no length: viewers hide it", ev)
			}
		case ev.Name == "process_name":
			names++
			if ev.PID == 1 && ev.Args["name"] != "rank 1 (worker)" {
				t.Errorf("rank 1 is named %v", ev.Args["name"])
			}
		case ev.Name == "thread_name":
			threads++
		}
	}
	if spans != 2 || names != 2 || threads != 4 {
		t.Fatalf("%d spans, %d process names, %d thread names:\n%s", spans, names, threads, b)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".timeline.json.*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
