package executor

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
)

// shipped is what --archives, --py-files and spindle.python add to a
// training process once its files are in place.
type shipped struct {
	// command is the training command, its interpreter replaced when
	// spindle.python names one.
	command []string
	// pythonPath are entries to put first on PYTHONPATH (--py-files).
	pythonPath []string
}

// prepareShipped unpacks t's archives into filesDir under their aliases,
// copies its py-files there, links both into procDir (the process's
// working directory) when that is the executor's own, and works out the
// command and PYTHONPATH entries.
func prepareShipped(ctx context.Context, res *fsys.Resolver, t *Task, filesDir, procDir string) (shipped, error) {
	out := shipped{command: t.Command}
	// --files (already in filesDir) are placed in the working directory
	// too, as spark-submit places them: --files train.py -- python3 train.py.
	var names []string
	for _, f := range t.Files {
		names = append(names, path.Base(filepath.ToSlash(f)))
	}
	for _, a := range t.Archives {
		uri, alias := splitArchive(a)
		if err := unpackArchive(ctx, res, uri, filepath.Join(filesDir, alias)); err != nil {
			return out, fmt.Errorf("unpack --archives %s: %w", a, err)
		}
		names = append(names, alias)
	}
	if len(t.PyFiles) > 0 {
		if err := localizeFiles(ctx, res, t.PyFiles, filesDir); err != nil {
			return out, fmt.Errorf("--py-files: %w", err)
		}
		dirOnPath := false
		for _, f := range t.PyFiles {
			name := path.Base(filepath.ToSlash(f))
			names = append(names, name)
			if strings.HasSuffix(name, ".py") {
				if !dirOnPath {
					out.pythonPath = append(out.pythonPath, filesDir)
					dirOnPath = true
				}
				continue
			}
			out.pythonPath = append(out.pythonPath, filepath.Join(filesDir, name))
		}
	}
	if procDir != "" {
		for _, name := range names {
			if err := linkInto(procDir, filepath.Join(filesDir, name), name); err != nil {
				return out, err
			}
		}
	}
	if t.Python != "" && len(t.Command) > 0 && isPythonCommand(t.Command[0]) {
		py := t.Python
		// A relative interpreter may live in an archive (env/bin/python).
		if !filepath.IsAbs(py) && strings.Contains(py, "/") {
			if _, err := os.Stat(filepath.Join(filesDir, py)); err == nil {
				py = filepath.Join(filesDir, py)
			}
		}
		out.command = append([]string{py}, t.Command[1:]...)
	}
	return out, nil
}

// splitArchive splits "uri#alias" (the driver always sends the alias).
func splitArchive(a string) (uri, alias string) {
	if i := strings.LastIndexByte(a, '#'); i >= 0 {
		return a[:i], a[i+1:]
	}
	return a, path.Base(filepath.ToSlash(a))
}

// isPythonCommand says whether a training command's first word runs
// Python, so that spindle.python replaces it: python, python3, python3.11.
func isPythonCommand(arg0 string) bool {
	base := filepath.Base(arg0)
	if base == "python" || base == "python3" {
		return true
	}
	rest, ok := strings.CutPrefix(base, "python3.")
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// linkInto makes dir/name a symbolic link to target, unless dir/name is
// target already.
func linkInto(dir, target, name string) error {
	link := filepath.Join(dir, name)
	if link == target {
		return nil
	}
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("place %s in the working directory %s: %w", name, dir, err)
	}
	return nil
}

// unpackArchive extracts the .zip, .tar, .tar.gz or .tgz archive at uri
// into dest.
func unpackArchive(ctx context.Context, res *fsys.Resolver, uri, dest string) error {
	fs, name, err := res.Resolve(ctx, uri)
	if err != nil {
		return err
	}
	src, err := openCounted(ctx, fs, name)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".zip"):
		// zip reads its directory from the end: keep a local copy.
		tmp, err := os.CreateTemp(filepath.Dir(dest), ".archive-*.zip")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		size, err := io.Copy(tmp, src)
		if err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		return unzip(tmp, size, dest)
	case strings.HasSuffix(lower, ".tar.gz"), strings.HasSuffix(lower, ".tgz"):
		zr, err := gzip.NewReader(src)
		if err != nil {
			return fmt.Errorf("gunzip: %w", err)
		}
		defer zr.Close()
		return untar(zr, dest)
	case strings.HasSuffix(lower, ".tar"):
		return untar(src, dest)
	}
	return fmt.Errorf("%s is not a .zip, .tar, .tar.gz or .tgz archive", name)
}

// entryPath returns where an archive entry goes under dest, refusing
// names that would leave it (absolute, "..") or pass through a symbolic
// link the archive made.
func entryPath(dest, name string) (string, error) {
	clean := path.Clean("/" + filepath.ToSlash(name))[1:]
	if clean == "" {
		return dest, nil
	}
	if name != "" && (path.IsAbs(filepath.ToSlash(name)) || strings.HasPrefix(path.Clean(filepath.ToSlash(name)), "..")) {
		return "", fmt.Errorf("entry %q would be written outside the archive's directory", name)
	}
	p := dest
	parts := strings.Split(clean, "/")
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		if st, err := os.Lstat(p); err == nil && st.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("entry %q goes through the symbolic link %s", name, part)
		}
	}
	return filepath.Join(p, parts[len(parts)-1]), nil
}

func untar(r io.Reader, dest string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		p, err := entryPath(dest, h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeEntry(p, h.FileInfo().Mode().Perm(), tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := entryPath(dest, h.Linkname)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Link(target, p); err != nil {
				return err
			}
		default:
			// Devices, fifos and the like have no place in a shipped
			// environment; skip them.
		}
	}
}

func unzip(f *os.File, size int64, dest string) error {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return fmt.Errorf("read zip: %w", err)
	}
	for _, zf := range zr.File {
		p, err := entryPath(dest, zf.Name)
		if err != nil {
			return err
		}
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case mode&os.ModeSymlink != 0:
			rc, err := zf.Open()
			if err != nil {
				return err
			}
			target, err := io.ReadAll(io.LimitReader(rc, 4096))
			rc.Close()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(string(target), p); err != nil {
				return err
			}
		default:
			rc, err := zf.Open()
			if err != nil {
				return err
			}
			err = writeEntry(p, mode.Perm(), rc)
			rc.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// writeEntry writes one regular file of an archive.
func writeEntry(p string, perm os.FileMode, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if perm == 0 {
		perm = 0o644
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	return f.Close()
}

// prependPythonPath puts dirs first on the PYTHONPATH of env.
func prependPythonPath(env []string, dirs []string) []string {
	if len(dirs) == 0 {
		return env
	}
	add := strings.Join(dirs, string(os.PathListSeparator))
	for i, kv := range env {
		if old, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			if old != "" {
				add += string(os.PathListSeparator) + old
			}
			env[i] = "PYTHONPATH=" + add
			return env
		}
	}
	return append(env, "PYTHONPATH="+add)
}
