package python

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Dir returns a directory to put on PYTHONPATH so that `import spindle`
// finds the embedded package, unpacking it into the first usable cache
// directory (CacheDirs) when it is not there yet.
func Dir() (string, error) {
	var errs []error
	for _, cache := range CacheDirs() {
		dir, err := Unpack(cache)
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("unpack the spindle Python package (set spindle.python.path to a directory holding spindle/__init__.py instead): %w", errors.Join(errs...))
}

// CacheDirs lists where Dir unpacks the package, best first: the user's
// cache directory ($XDG_CACHE_HOME/spindle/python, else
// ~/.cache/spindle/python), then a directory of this user's own under the
// system's temporary directory, for containers with no home.
func CacheDirs() []string {
	var dirs []string
	if c, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(c, "spindle", "python"))
	}
	return append(dirs, filepath.Join(os.TempDir(), "spindle-python-"+strconv.Itoa(os.Getuid())))
}

// Unpack makes sure cacheDir/<Version()> holds the embedded package and
// returns that directory. A tree already there is checked file by file
// against the embedded one and replaced when it differs (a crash while
// writing, a hand edit). A new tree is written into a temporary directory
// beside it and renamed into place, so concurrent callers, in this process
// or others, only ever see a whole tree.
func Unpack(cacheDir string) (string, error) {
	if err := ownDir(cacheDir); err != nil {
		return "", err
	}
	target := filepath.Join(cacheDir, Version())
	for attempt := 0; ; attempt++ {
		if same(target) {
			return target, nil
		}
		if attempt == 3 {
			return "", fmt.Errorf("unpack into %s: the tree there keeps differing from this binary's", target)
		}
		if err := moveAside(cacheDir, target); err != nil {
			return "", err
		}
		tmp, err := writeTree(cacheDir)
		if err != nil {
			return "", err
		}
		if err := os.Rename(tmp, target); err != nil {
			// Another process renamed its tree first: use it (the loop checks it).
			os.RemoveAll(tmp)
			if !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
				return "", fmt.Errorf("unpack into %s: %w", target, err)
			}
		}
	}
}

// ownDir creates dir (mode 0700) if needed and checks that it is a
// directory of this user's that nobody else can write to, since what is
// in it runs as Python code in every training process.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create python cache %s: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("python cache %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("python cache %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("python cache %s is writable by others (mode %s)", dir, st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("python cache %s belongs to uid %d, not to this user (uid %d)", dir, sys.Uid, os.Getuid())
	}
	return nil
}

// same reports whether dir holds exactly the embedded files.
func same(dir string) bool {
	ok := true
	err := fs.WalkDir(files, PackageName, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, want) {
			ok = false
			return fs.SkipAll
		}
		return nil
	})
	return err == nil && ok
}

// moveAside renames a damaged tree at target out of the way and removes
// it. Renaming first means no reader sees it half-deleted. A whole tree is
// never changed in place, so one that checks out right here is left alone:
// another process renamed it in since the caller looked.
func moveAside(cacheDir, target string) error {
	if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) || same(target) {
		return nil
	}
	stale, err := os.MkdirTemp(cacheDir, ".stale-")
	if err != nil {
		return fmt.Errorf("python cache %s: %w", cacheDir, err)
	}
	aside := filepath.Join(stale, "tree")
	if err := os.Rename(target, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.RemoveAll(stale)
		return fmt.Errorf("move stale python tree %s aside: %w", target, err)
	}
	return os.RemoveAll(stale)
}

// writeTree writes the embedded package into a new temporary directory
// under cacheDir and returns it. Files are synced so that a tree renamed
// into place survives a crash whole.
func writeTree(cacheDir string) (string, error) {
	tmp, err := os.MkdirTemp(cacheDir, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("python cache %s: %w", cacheDir, err)
	}
	err = fs.WalkDir(files, PackageName, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, filepath.FromSlash(name))
		if d.IsDir() {
			return os.Mkdir(dst, 0o755)
		}
		b, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		return writeSynced(dst, b)
	})
	if err == nil {
		err = os.Chmod(tmp, 0o755)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("write python package into %s: %w", tmp, err)
	}
	return tmp, nil
}

func writeSynced(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
