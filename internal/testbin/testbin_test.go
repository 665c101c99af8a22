package testbin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildTakesPrebuiltBinaries: a program found in the prebuilt
// directory is the same file in the test's directory (linked, not built
// again); one that is not there is built.
func TestBuildTakesPrebuiltBinaries(t *testing.T) {
	prebuilt, dir := t.TempDir(), filepath.Join(t.TempDir(), "bin")
	src := filepath.Join(prebuilt, "spindle")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho prebuilt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var spindle, hello string
	err := build(context.Background(), "../..", dir, prebuilt, []Bin{
		{&spindle, "./cmd/spindle"}, {&hello, "./internal/testbin/testdata/hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if spindle != filepath.Join(dir, "spindle") || hello != filepath.Join(dir, "hello") {
		t.Fatalf("paths %q, %q: want the programs' names in %s", spindle, hello, dir)
	}
	a, errA := os.Stat(src)
	b, errB := os.Stat(spindle)
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("%s is not the prebuilt %s (%v, %v)", spindle, src, errA, errB)
	}
	out, err := exec.Command(hello).Output()
	if err != nil || !strings.Contains(string(out), "hello from a test binary") {
		t.Errorf("the built hello: %q, %v", out, err)
	}
}

// TestBuildWithoutPrebuilt builds every program, as a plain go test does.
func TestBuildWithoutPrebuilt(t *testing.T) {
	dir := t.TempDir()
	var hello string
	if err := build(context.Background(), "../..", dir, "", []Bin{{&hello, "./internal/testbin/testdata/hello"}}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(hello).Output(); err != nil || !strings.Contains(string(out), "hello") {
		t.Errorf("the built hello: %q, %v", out, err)
	}
}

// TestBuildNamesTheFailure: a package that does not build is named.
func TestBuildNamesTheFailure(t *testing.T) {
	var x string
	err := build(context.Background(), "../..", t.TempDir(), "", []Bin{{&x, "./internal/testbin/testdata/nosuch"}})
	if err == nil || !strings.Contains(err.Error(), "testdata/nosuch") {
		t.Fatalf("err %v, want one naming the package", err)
	}
}
