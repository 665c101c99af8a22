package testbin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerFile names, in a directory TempDir made, the file that holds the
// pid of the test process that owns it.
const ownerFile = ".owner-pid"

// unownedAge is how old a directory with TempDir's prefix but no owner
// file (one an older layout made, or one whose owner died before writing
// the file) must be before TempDir removes it.
const unownedAge = 24 * time.Hour

// TempDir gives a test process a temporary directory of its own, named
// prefix and random characters in the machine's temporary directory, and
// points TMPDIR at it: t.TempDir's directories and whatever the processes
// the tests start put in theirs (a killed executor's socket directory, a
// spindle client's staging files) land inside it, and cleanup removes
// them all. Call it first in TestMain and cleanup after m.Run.
//
// A test binary that times out panics without running cleanup, and one
// interrupted dies; so TempDir first removes the directories with the
// same prefix that test processes now gone left behind.
func TempDir(prefix string) (dir string, cleanup func(), err error) {
	dir, err = OwnedDir(prefix)
	if err != nil {
		return "", nil, err
	}
	old, had := os.LookupEnv("TMPDIR")
	if err := os.Setenv("TMPDIR", dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("set TMPDIR to %s: %w", dir, err)
	}
	return dir, func() {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
		os.RemoveAll(dir)
	}, nil
}

// OwnedDir makes a directory named prefix and random characters in the
// machine's temporary directory, owned by this process: after removing
// the directories with the same prefix whose owner processes are gone.
// The caller removes it when done; if the process dies first, the next
// OwnedDir or TempDir with the prefix does.
func OwnedDir(prefix string) (string, error) {
	parent := os.TempDir()
	sweep(parent, prefix)
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", fmt.Errorf("make a test directory in %s: %w", parent, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("write the owner of %s: %w", dir, err)
	}
	return dir, nil
}

// sweep removes the directories in parent named with prefix whose owner
// process is gone. It keeps any it cannot judge: a live owner (perhaps a
// run of the same tests beside this one), an owner of another user.
func sweep(parent, prefix string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if abandoned(dir) {
			os.RemoveAll(dir)
		}
	}
}

// abandoned reports whether dir's owner process is gone, or, without an
// owner file, whether dir is older than unownedAge.
func abandoned(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if errors.Is(err, os.ErrNotExist) {
		fi, err := os.Stat(dir)
		return err == nil && time.Since(fi.ModTime()) > unownedAge
	}
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	// Signal 0 checks that the process exists without touching it.
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
