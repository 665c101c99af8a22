package eventlog

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// TestLocalEventLogIsPrivate: a local event log holds every rank's
// output, so its directory is 0700 and its files 0600 whatever the umask.
func TestLocalEventLogIsPrivate(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	dir := filepath.Join(t.TempDir(), "events")
	w, err := NewWriter(ctx, res, dir, "job-1", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Record(jobview.Event{Time: time.Unix(0, 0), Kind: jobview.KindLog, Rank: 0, Stream: "stdout", Line: "secret output"})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(filepath.Join(dir, "job-1"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walk the event log: %d files, %v", files, err)
	}
}
