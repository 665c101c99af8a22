package fsys

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Local returns the local file system. Names are absolute slash paths;
// errors are the os package's own (*fs.PathError wrapping fs.ErrNotExist
// and so on). Each call checks ctx before it starts but local I/O is not
// interrupted midway.
func Local() FS { return localFS{} }

type localFS struct{}

var _ FS = localFS{}

func (localFS) Open(ctx context.Context, name string) (File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	return &localFile{File: f, size: fi.Size()}, nil
}

func (localFS) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return os.Stat(filepath.FromSlash(name))
}

func (localFS) ReadDir(ctx context.Context, name string) ([]fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	infos := make([]fs.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return nil, err
		}
		infos = append(infos, fi)
	}
	return infos, nil
}

func (l localFS) Glob(ctx context.Context, pattern string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, &fs.PathError{Op: "glob", Path: pattern, Err: err}
	}
	if !path.IsAbs(pattern) {
		return nil, &fs.PathError{Op: "glob", Path: pattern, Err: errors.New("pattern is not an absolute path")}
	}
	clean := path.Clean(pattern)
	if !hasMeta(clean) {
		if _, err := os.Lstat(filepath.FromSlash(clean)); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil, nil
			}
			return nil, err
		}
		return []string{clean}, nil
	}
	elems := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	var out []string
	if err := l.glob(ctx, "/", elems, &out); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// glob appends to out the names under dir that match the remaining
// pattern elements.
func (l localFS) glob(ctx context.Context, dir string, elems []string, out *[]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	elem, rest := elems[0], elems[1:]
	var names []string
	if !hasMeta(elem) {
		names = []string{elem}
	} else {
		entries, err := os.ReadDir(filepath.FromSlash(dir))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		for _, e := range entries {
			if ok, _ := path.Match(elem, e.Name()); ok {
				names = append(names, e.Name())
			}
		}
	}
	for _, n := range names {
		p := path.Join(dir, n)
		fi, err := os.Stat(filepath.FromSlash(p))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				continue
			}
			return err
		}
		if len(rest) == 0 {
			*out = append(*out, p)
			continue
		}
		if fi.IsDir() {
			if err := l.glob(ctx, p, rest, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasMeta reports whether s holds any of path.Match's special characters.
func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// CreateAtomic makes the file readable as os.Create would: 0666 less the
// process's umask.
func (l localFS) CreateAtomic(ctx context.Context, name string) (AtomicFile, error) {
	return l.create(ctx, name, 0o666&^umask)
}

// create makes name's temporary file with mode perm.
func (localFS) create(ctx context.Context, name string, perm os.FileMode) (AtomicFile, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	final := filepath.FromSlash(name)
	dir, base := filepath.Split(final)
	if base == "" {
		return nil, &fs.PathError{Op: "create", Path: name, Err: syscall.EISDIR}
	}
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		// Report the name the caller asked for, not the temporary one.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, &fs.PathError{Op: "create", Path: name, Err: pe.Err}
		}
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	// CreateTemp makes the file 0600 whatever the umask.
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	return &localAtomic{f: f, final: final, dir: dir}, nil
}

func (localFS) MkdirAll(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// As mkdir -p: 0777 less the umask.
	return os.MkdirAll(filepath.FromSlash(name), 0o777)
}

func (localFS) Rename(ctx context.Context, from, to string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Rename(filepath.FromSlash(from), filepath.FromSlash(to))
}

func (localFS) Remove(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Remove(filepath.FromSlash(name))
}

func (localFS) Locations(ctx context.Context, name string, off, length int64) ([]string, error) {
	return nil, ctx.Err()
}

// localFile is an open local file; its size is fixed when it is opened.
type localFile struct {
	*os.File
	size int64
}

func (f *localFile) Size() int64 { return f.size }

// localAtomic writes to a hidden temporary file beside the final name.
type localAtomic struct {
	f     *os.File
	final string
	dir   string
	done  bool
}

func (a *localAtomic) Write(p []byte) (int, error) {
	if a.done {
		return 0, &fs.PathError{Op: "write", Path: a.final, Err: os.ErrClosed}
	}
	return a.f.Write(p)
}

// Commit makes the data durable before the rename and the rename durable
// after it, so that after a crash the final name holds either the old
// file or the whole new one.
func (a *localAtomic) Commit() error {
	if a.done {
		return &fs.PathError{Op: "commit", Path: a.final, Err: os.ErrClosed}
	}
	a.done = true
	tmp := a.f.Name()
	fail := func(op string, err error) error {
		a.f.Close()
		os.Remove(tmp)
		return fmt.Errorf("%s %s: %w", op, a.final, err)
	}
	if err := a.f.Sync(); err != nil {
		return fail("sync", err)
	}
	if err := a.f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close %s: %w", a.final, err)
	}
	if err := os.Rename(tmp, a.final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("publish %s: %w", a.final, err)
	}
	if err := syncDir(a.dir); err != nil {
		return fmt.Errorf("publish %s: sync directory: %w", a.final, err)
	}
	return nil
}

func (a *localAtomic) Abort() error {
	if a.done {
		return nil
	}
	a.done = true
	tmp := a.f.Name()
	cerr := a.f.Close()
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("abort %s: %w", a.final, err)
	}
	if cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		return fmt.Errorf("abort %s: %w", a.final, cerr)
	}
	return nil
}

// syncDir flushes a directory's entries (a rename in it) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some file systems cannot sync a directory; the rename still happened.
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}
