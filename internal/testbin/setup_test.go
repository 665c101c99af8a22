package testbin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetup: the package's programs land in the bin directory of a
// TMPDIR of its own, which cleanup removes and points back.
func TestSetup(t *testing.T) {
	prebuilt := t.TempDir()
	if err := os.WriteFile(filepath.Join(prebuilt, "spindle"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, prebuilt)
	t.Setenv("TMPDIR", t.TempDir())
	before := os.Getenv("TMPDIR")
	var spindle string
	dir, cleanup, err := Setup(context.Background(), "testbin-setup-", Bin{&spindle, "./cmd/spindle"})
	if err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv("TMPDIR"); got != dir {
		t.Errorf("TMPDIR %q, want the package's directory %q", got, dir)
	}
	if want := filepath.Join(dir, "bin", "spindle"); spindle != want {
		t.Errorf("spindle at %q, want %q", spindle, want)
	}
	if _, err := os.Stat(filepath.Join(Root(), "go.mod")); err != nil {
		t.Errorf("Root %q is not the module's root: %v", Root(), err)
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left after cleanup: %v", dir, err)
	}
	if got := os.Getenv("TMPDIR"); got != before {
		t.Errorf("TMPDIR %q after cleanup, want %q back", got, before)
	}
}

// TestSetupCleansUpAfterAFailedBuild: a program that does not build
// leaves no directory behind.
func TestSetupCleansUpAfterAFailedBuild(t *testing.T) {
	t.Setenv(EnvDir, "")
	parent := t.TempDir()
	t.Setenv("TMPDIR", parent)
	var x string
	if _, _, err := Setup(context.Background(), "testbin-setup-", Bin{&x, "./internal/testbin/testdata/nosuch"}); err == nil {
		t.Fatal("Setup of a package that does not exist succeeded")
	}
	if left, _ := filepath.Glob(filepath.Join(parent, "testbin-setup-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if got := os.Getenv("TMPDIR"); got != parent {
		t.Errorf("TMPDIR %q, want %q back", got, parent)
	}
}

// TestRootAbove: the root is the nearest directory above whose go.mod
// declares this module, passing over another module's go.mod (a test's
// scratch module) and failing, naming the start, where there is none.
func TestRootAbove(t *testing.T) {
	top := t.TempDir()
	write := func(dir, gomod string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(top, "// the module\nmodule "+module+"\n\ngo 1.26\n")
	other := filepath.Join(top, "testdata", "other")
	write(other, "module example.com/other\n")
	start := filepath.Join(other, "pkg")
	if err := os.MkdirAll(start, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := rootAbove(start); err != nil || got != top {
		t.Errorf("rootAbove(%s) = %q, %v; want %q", start, got, err, top)
	}
	if got, err := rootAbove(t.TempDir()); err == nil || !strings.Contains(err.Error(), module) {
		t.Errorf("rootAbove outside the module = %q, %v; want an error naming %s", got, err, module)
	}
}
