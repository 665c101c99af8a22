package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/fsys"
)

// archiveCache unpacks each --archives archive once per host and
// content: ranks on one host (and later jobs of the same user shipping
// the same bytes) share the directory. An archive is unpacked into a
// temporary directory under a per-content lock and renamed into place,
// so a half-unpacked directory is never used.
type archiveCache struct {
	root string
	lim  ArchiveLimits
}

// defaultArchiveCache is where archives are unpacked when the executor
// is not told: under the application's local directory of a YARN
// container (removed with the application), else in the system's
// temporary directory, one per user.
func defaultArchiveCache() string {
	if dirs := os.Getenv("LOCAL_DIRS"); dirs != "" {
		first, _, _ := strings.Cut(dirs, ",")
		return filepath.Join(first, "spindle-archives")
	}
	return filepath.Join(os.TempDir(), "spindle-archives-"+strconv.Itoa(os.Getuid()))
}

// ensureRoot makes the cache's root, refusing one another user could
// have planted (a shared temporary directory): it must be a real
// directory of this user that nobody else can write to.
func (c *archiveCache) ensureRoot() error {
	if err := os.MkdirAll(c.root, 0o700); err != nil {
		return fmt.Errorf("create the archive cache %s: %w", c.root, err)
	}
	st, err := os.Lstat(c.root)
	if err != nil {
		return fmt.Errorf("archive cache %s: %w", c.root, err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return fmt.Errorf("archive cache %s is not a directory (a symbolic link?)", c.root)
	case ok && int(sys.Uid) != os.Getuid():
		return fmt.Errorf("archive cache %s belongs to uid %d, not to this user: remove it", c.root, sys.Uid)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("archive cache %s is writable by others (mode %v): make it 0700", c.root, st.Mode().Perm())
	}
	return nil
}

// unpack fetches the archive at uri, and returns the directory holding
// its unpacked content, unpacking it unless another rank did; unpacked
// says whether this call did.
func (c *archiveCache) unpack(ctx context.Context, res *fsys.Resolver, uri string) (dir string, unpacked bool, err error) {
	fs, name, err := res.Resolve(ctx, uri)
	if err != nil {
		return "", false, err
	}
	format, err := archiveFormat(name)
	if err != nil {
		return "", false, err
	}
	if err := c.ensureRoot(); err != nil {
		return "", false, err
	}
	// The content's hash names the unpacked directory: fetch first.
	tmp, err := os.CreateTemp(c.root, ".fetch-*")
	if err != nil {
		return "", false, fmt.Errorf("fetch: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	src, err := openCounted(ctx, fs, name)
	if err != nil {
		return "", false, err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(tmp, h), src)
	src.Close()
	if err != nil {
		return "", false, fmt.Errorf("fetch: %w", err)
	}
	key := format + "-" + hex.EncodeToString(h.Sum(nil))[:40]
	final := filepath.Join(c.root, key)
	if st, err := os.Lstat(final); err == nil && st.IsDir() {
		return final, false, nil
	}
	unlock, err := lockFile(ctx, filepath.Join(c.root, key+".lock"))
	if err != nil {
		return "", false, err
	}
	defer unlock()
	// Another rank may have finished while this one waited.
	if st, err := os.Lstat(final); err == nil && st.IsDir() {
		return final, false, nil
	}
	work, err := os.MkdirTemp(c.root, ".unpack-"+key+"-")
	if err != nil {
		return "", false, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		os.RemoveAll(work)
		return "", false, err
	}
	if err := extract(tmp, format, work, c.lim); err != nil {
		os.RemoveAll(work)
		return "", false, err
	}
	if err := os.Rename(work, final); err != nil {
		os.RemoveAll(work)
		return "", false, fmt.Errorf("put the unpacked archive in place: %w", err)
	}
	return final, true, nil
}

// lockFile takes an exclusive lock on path (made if missing), waiting
// for another process holding it as long as ctx allows.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another rank unpacking the same archive (%s): %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}
