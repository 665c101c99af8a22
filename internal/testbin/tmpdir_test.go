package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestTempDirPointsTMPDIRAndCleansUp: TMPDIR names the new directory while
// the tests run, and cleanup removes it with what was put in it and gives
// TMPDIR back.
func TestTempDirPointsTMPDIRAndCleansUp(t *testing.T) {
	parent := t.TempDir()
	t.Setenv("TMPDIR", parent)
	dir, cleanup, err := TempDir("spindle-x-")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != parent || os.Getenv("TMPDIR") != dir || os.TempDir() != dir {
		t.Fatalf("dir %s, TMPDIR %s: want a directory in %s named in TMPDIR", dir, os.Getenv("TMPDIR"), parent)
	}
	left, err := os.MkdirTemp("", "spindle-job-0-")
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("%s still there after cleanup (stat: %v)", left, err)
	}
	if os.Getenv("TMPDIR") != parent {
		t.Errorf("TMPDIR %q after cleanup, want %s back", os.Getenv("TMPDIR"), parent)
	}
}

// TestTempDirSweepsAbandoned: the directories an interrupted run left
// (their owner process gone, or no owner and a day old) go; a live
// owner's, another prefix's and a fresh unowned one stay.
func TestTempDirSweepsAbandoned(t *testing.T) {
	parent := t.TempDir()
	t.Setenv("TMPDIR", parent)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, owner string) string {
		t.Helper()
		d := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(d, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	dead := mk("spindle-x-1", strconv.Itoa(gone.Process.Pid))
	live := mk("spindle-x-2", strconv.Itoa(os.Getpid()))
	fresh := mk("spindle-x-3", "")
	old := mk("spindle-x-4", "")
	day := time.Now().Add(-unownedAge - time.Hour)
	if err := os.Chtimes(old, day, day); err != nil {
		t.Fatal(err)
	}
	other := mk("spindle-y-1", strconv.Itoa(gone.Process.Pid))
	_, cleanup, err := TempDir("spindle-x-")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	for d, want := range map[string]bool{dead: false, old: false, live: true, fresh: true, other: true} {
		_, err := os.Stat(d)
		if got := err == nil; got != want {
			t.Errorf("%s: there %v, want %v", filepath.Base(d), got, want)
		}
	}
}
