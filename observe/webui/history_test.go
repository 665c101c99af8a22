package webui

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
)

// A finished job is listed from the summary beside its log, without
// replaying the log: here the log itself cannot be read at all.
func TestHistoryListsFinishedJobsFromTheirSummaries(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job-9")
	if err := os.MkdirAll(job, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(job, "events.jsonl"), []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	summary := `{"id":"job-9","name":"big","user":"ann","mode":"yarn","state":"SUCCEEDED","start":"2026-11-29T07:00:00Z","duration_seconds":3600}`
	if err := os.WriteFile(filepath.Join(job, "summary.json"), []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	jobs, err := NewHistory(res, dir).Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != "job-9" || jobs[0].Name != "big" || jobs[0].State != "SUCCEEDED" || jobs[0].Duration != 3600 {
		t.Errorf("history lists %+v, want job-9 from its summary", jobs)
	}
}
