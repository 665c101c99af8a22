package executor

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A work directory too deep for Unix socket paths (as YARN's container
// directories are) keeps the task's files and spill; only the sockets
// move to a short temporary directory, which the task's end removes.
func TestTaskDirsDeepWorkDirKeepsFilesMovesSockets(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	e := &Executor{cfg: Config{WorkDir: deep}}
	work, sockets, cleanup, err := e.taskDirs(&Task{JobId: "application_1_0001"}, identity{rank: 3})
	if err != nil {
		t.Fatal(err)
	}
	if work != deep {
		t.Errorf("work directory %s, want the executor's own %s (files and spill stay on its disks)", work, deep)
	}
	if sockets == deep || !socketPathFits(sockets) {
		t.Fatalf("socket directory %s: want a short one apart from %s", sockets, deep)
	}
	for _, sock := range []string{reportSocket(sockets), checkpointSocket(sockets), psSocket(sockets), filepath.Join(sockets, longestSocketName)} {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatalf("listen at %s: %v", sock, err)
		}
		l.Close()
	}
	cleanup()
	if _, err := os.Stat(sockets); !os.IsNotExist(err) {
		t.Errorf("socket directory %s left after the task: %v", sockets, err)
	}
	if _, err := os.Stat(deep); err != nil {
		t.Errorf("the executor's own directory was removed with the sockets: %v", err)
	}
}

// A short work directory of the executor's own holds everything and is
// left to its manager; a local job's rank gets one temporary directory
// for both, removed at the task's end.
func TestTaskDirsShortOrNone(t *testing.T) {
	own := t.TempDir()
	e := &Executor{cfg: Config{WorkDir: own}}
	work, sockets, cleanup, err := e.taskDirs(&Task{JobId: "j"}, identity{rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	if work != own || sockets != own {
		t.Errorf("dirs (%s, %s), want both %s", work, sockets, own)
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("the executor's own directory removed at the task's end: %v", err)
	}

	local := &Executor{}
	work, sockets, cleanup, err = local.taskDirs(&Task{JobId: "j", Dir: t.TempDir()}, identity{rank: 1})
	if err != nil {
		t.Fatal(err)
	}
	if work != sockets || !strings.Contains(filepath.Base(work), "spindle-j-1-") {
		t.Errorf("dirs (%s, %s), want one temporary directory named after the job and rank", work, sockets)
	}
	cleanup()
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s left after the task: %v", work, err)
	}
}
