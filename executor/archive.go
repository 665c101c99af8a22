package executor

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Defaults of spindle.archives.maxBytes and spindle.archives.maxEntries:
// room for a CUDA PyTorch conda environment, not for a disk-filling bomb.
const (
	DefaultArchiveMaxBytes   = 32 << 30
	DefaultArchiveMaxEntries = 1_000_000
)

// ArchiveLimits bound what unpacking one --archives archive may write.
type ArchiveLimits struct {
	// MaxBytes bounds the bytes of all regular files together
	// (spindle.archives.maxBytes); 0 takes the default.
	MaxBytes int64
	// MaxEntries bounds the entries of any kind
	// (spindle.archives.maxEntries); 0 takes the default.
	MaxEntries int
}

func (l ArchiveLimits) withDefaults() ArchiveLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultArchiveMaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultArchiveMaxEntries
	}
	return l
}

// archiveFormat says how an archive is read, from its name.
func archiveFormat(name string) (string, error) {
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".zip"):
		return "zip", nil
	case strings.HasSuffix(lower, ".tar.gz"), strings.HasSuffix(lower, ".tgz"):
		return "tgz", nil
	case strings.HasSuffix(lower, ".tar"):
		return "tar", nil
	}
	return "", fmt.Errorf("%s is not a .zip, .tar, .tar.gz or .tgz archive", name)
}

// extractor writes the entries of one archive under dest, counting them
// against its limits. It never writes through a symbolic link: parents
// are checked with Lstat (entryPath) and the last component is opened
// with O_NOFOLLOW after whatever the archive put there is removed.
type extractor struct {
	dest    string
	lim     ArchiveLimits
	entries int
	bytes   int64
}

// extract unpacks the archive in f (of the given format) into dest.
func extract(f *os.File, format, dest string, lim ArchiveLimits) error {
	x := &extractor{dest: dest, lim: lim.withDefaults()}
	switch format {
	case "zip":
		st, err := f.Stat()
		if err != nil {
			return err
		}
		return x.unzip(f, st.Size())
	case "tgz":
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("gunzip: %w", err)
		}
		defer zr.Close()
		return x.untar(zr)
	case "tar":
		return x.untar(f)
	}
	return fmt.Errorf("unknown archive format %q", format)
}

// count adds one entry, refusing one past the limit.
func (x *extractor) count(name string) error {
	x.entries++
	if x.entries > x.lim.MaxEntries {
		return fmt.Errorf("entry %q: more than %d entries (raise spindle.archives.maxEntries if the archive is genuine)", name, x.lim.MaxEntries)
	}
	return nil
}

func (x *extractor) untar(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar after %d entries: %w", x.entries, err)
		}
		if err := x.count(h.Name); err != nil {
			return err
		}
		if err := x.tarEntry(h, tr); err != nil {
			return fmt.Errorf("entry %q: %w", h.Name, err)
		}
	}
}

func (x *extractor) tarEntry(h *tar.Header, r io.Reader) error {
	p, err := entryPath(x.dest, h.Name)
	if err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return x.mkdir(p)
	case tar.TypeReg:
		return x.writeFile(p, h.FileInfo().Mode().Perm(), r)
	case tar.TypeSymlink:
		return x.symlink(p, h.Name, h.Linkname)
	case tar.TypeLink:
		return x.hardlink(p, h.Linkname)
	}
	// Devices, fifos and the like have no place in a shipped
	// environment; skip them.
	return nil
}

func (x *extractor) unzip(f *os.File, size int64) error {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return fmt.Errorf("read zip: %w", err)
	}
	for _, zf := range zr.File {
		if err := x.count(zf.Name); err != nil {
			return err
		}
		if err := x.zipEntry(zf); err != nil {
			return fmt.Errorf("entry %q: %w", zf.Name, err)
		}
	}
	return nil
}

func (x *extractor) zipEntry(zf *zip.File) error {
	p, err := entryPath(x.dest, zf.Name)
	if err != nil {
		return err
	}
	mode := zf.Mode()
	if mode.IsDir() {
		return x.mkdir(p)
	}
	if mode&^(os.ModePerm|os.ModeSymlink) != 0 {
		return nil // devices and the like, as for tar
	}
	rc, err := zf.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	if mode&os.ModeSymlink != 0 {
		target, err := io.ReadAll(io.LimitReader(rc, 4096))
		if err != nil {
			return err
		}
		return x.symlink(p, zf.Name, string(target))
	}
	return x.writeFile(p, mode.Perm(), rc)
}

// mkdir makes directory p, refusing to make it through or over a link.
func (x *extractor) mkdir(p string) error {
	if st, err := os.Lstat(p); err == nil {
		if st.IsDir() {
			return nil
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return os.MkdirAll(p, 0o755)
}

// clearEntry removes what an earlier entry left at p, so that p is written
// afresh and never through a symbolic link; a directory stays and is
// refused.
func clearEntry(p string) error {
	st, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() {
		return errors.New("a directory of the same name is already there")
	}
	return os.Remove(p)
}

// writeFile writes one regular file, counting its bytes.
func (x *extractor) writeFile(p string, perm os.FileMode, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := clearEntry(p); err != nil {
		return err
	}
	if perm == 0 {
		perm = 0o644
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm|0o200)
	if err != nil {
		return err
	}
	left := x.lim.MaxBytes - x.bytes
	n, err := io.Copy(f, io.LimitReader(r, left+1))
	x.bytes += n
	if err == nil && n > left {
		err = fmt.Errorf("more than %d bytes unpacked (raise spindle.archives.maxBytes if the archive is genuine)", x.lim.MaxBytes)
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// symlink makes p a symbolic link to target. A relative target must
// stay inside the archive's directory; an absolute one names a file of
// the host (venv-pack links env/bin/python to the host's interpreter)
// and is kept, as nothing is ever written through a link.
func (x *extractor) symlink(p, name, target string) error {
	if target == "" {
		return errors.New("symbolic link with no target")
	}
	if !path.IsAbs(target) && escapes(filepath.ToSlash(name), target) {
		return fmt.Errorf("symbolic link to %q points outside the archive's directory", target)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := clearEntry(p); err != nil {
		return err
	}
	return os.Symlink(target, p)
}

// escapes says whether the relative link target, resolved from the
// directory of the entry name, climbs above the archive's root.
func escapes(name, target string) bool {
	depth := strings.Count(path.Clean("/"+name), "/") - 1
	for _, part := range strings.Split(target, "/") {
		switch part {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// hardlink makes p another name of an earlier regular file of the
// archive; a link to anything else (outside, a symbolic link) is refused.
func (x *extractor) hardlink(p, linkname string) error {
	target, err := entryPath(x.dest, linkname)
	if err != nil {
		return fmt.Errorf("hard link: %w", err)
	}
	st, err := os.Lstat(target)
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("hard link to %q: not a regular file the archive made before", linkname)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := clearEntry(p); err != nil {
		return err
	}
	return os.Link(target, p)
}

// entryPath returns where an archive entry goes under dest, refusing
// names that would leave it (absolute, "..") or pass through a symbolic
// link the archive made.
func entryPath(dest, name string) (string, error) {
	slash := filepath.ToSlash(name)
	if path.IsAbs(slash) || strings.HasPrefix(path.Clean(slash), "..") {
		return "", fmt.Errorf("entry %q would be written outside the archive's directory", name)
	}
	clean := path.Clean("/" + slash)[1:]
	if clean == "" {
		return dest, nil
	}
	p := dest
	parts := strings.Split(clean, "/")
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		if st, err := os.Lstat(p); err == nil && !st.IsDir() {
			return "", fmt.Errorf("entry %q goes through %s, which is not a directory (a symbolic link?)", name, part)
		}
	}
	return filepath.Join(p, parts[len(parts)-1]), nil
}
