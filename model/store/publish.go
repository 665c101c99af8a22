package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
)

// Source is one file of a version to publish.
type Source struct {
	// Path is the file's name inside the version directory: model.onnx,
	// or an external-data file beside it. One path element.
	Path string
	// Open returns the file's bytes.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// BytesSource is a file whose bytes are in memory.
func BytesSource(name string, b []byte) Source {
	return Source{Path: name, Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
}

// DirSource lists the files of dir (inside files), not descending into
// subdirectories nor taking hidden files or a manifest.json, which
// Publish writes itself.
func DirSource(ctx context.Context, files fsys.FS, dir string) ([]Source, error) {
	infos, err := files.ReadDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []Source
	for _, fi := range infos {
		name := fi.Name()
		if fi.IsDir() || strings.HasPrefix(name, ".") || name == ManifestFile {
			continue
		}
		full := path.Join(dir, name)
		out = append(out, Source{Path: name, Open: func(ctx context.Context) (io.ReadCloser, error) {
			f, err := files.Open(ctx, full)
			if err != nil {
				return nil, err
			}
			return f, nil
		}})
	}
	return out, nil
}

// maxPublishAttempts bounds how many version numbers a publisher tries
// when others take the ones it picked.
const maxPublishAttempts = 32

// Publish writes srcs and m as the next version of name, atomically, and
// returns it. m's Name, Version, Files and (when empty) Created and
// Format are filled in. srcs must hold model.onnx. On any error nothing
// is published and the hidden directory written so far is removed.
func (s *Store) Publish(ctx context.Context, name string, srcs []Source, m Manifest) (*Version, error) {
	if err := CheckName(name); err != nil {
		return nil, fmt.Errorf("model store %s: %w", s.Dir(), err)
	}
	if err := checkSources(srcs); err != nil {
		return nil, fmt.Errorf("model store %s: publish %s: %w", s.Dir(), name, err)
	}
	m.Name = name
	if m.Format == "" {
		m.Format = FormatONNX
	}
	if m.Created == "" {
		m.Created = now()
	}
	if err := m.validate(fmt.Sprintf("model store %s: publish %s", s.Dir(), name)); err != nil {
		return nil, err
	}
	modelDir := path.Join(s.dir, name)
	if err := s.fs.MkdirAll(ctx, modelDir); err != nil {
		return nil, fmt.Errorf("model store %s: create %s: %w", s.Dir(), modelDir, err)
	}
	tmp := path.Join(modelDir, ".publish-"+randomSuffix())
	if err := s.fs.MkdirAll(ctx, tmp); err != nil {
		return nil, fmt.Errorf("model store %s: create %s: %w", s.Dir(), tmp, err)
	}
	v, err := s.publishInto(ctx, name, tmp, srcs, m)
	if err != nil {
		// Best effort: a hidden directory left behind is skipped by readers.
		_ = removeAll(context.WithoutCancel(ctx), s.fs, tmp)
		return nil, err
	}
	return v, nil
}

// checkSources insists on a model.onnx and on distinct, plain file names.
func checkSources(srcs []Source) error {
	seen := map[string]bool{}
	for _, src := range srcs {
		p := src.Path
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, `/\`) || strings.HasPrefix(p, ".") || p == ManifestFile {
			return fmt.Errorf("file %q: want a plain file name (not hidden, not %s)", p, ManifestFile)
		}
		if seen[p] {
			return fmt.Errorf("file %q given twice", p)
		}
		seen[p] = true
	}
	if !seen[ModelFile] {
		return fmt.Errorf("no %s among the files", ModelFile)
	}
	return nil
}

// publishInto writes the files and the manifest into tmp and renames it
// to the next free version number.
func (s *Store) publishInto(ctx context.Context, name, tmp string, srcs []Source, m Manifest) (*Version, error) {
	where := fmt.Sprintf("model store %s: publish %s", s.Dir(), name)
	m.Files = m.Files[:0]
	for _, src := range srcs {
		f, err := copyFile(ctx, s.fs, path.Join(tmp, src.Path), src)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, src.Path, err)
		}
		m.Files = append(m.Files, f)
	}
	for range maxPublishAttempts {
		vs, err := s.Versions(ctx, name)
		if err != nil {
			return nil, err
		}
		n := 1
		if len(vs) > 0 {
			n = vs[len(vs)-1] + 1
		}
		m.Version = n
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("%s: encode manifest: %w", where, err)
		}
		if err := writeFile(ctx, s.fs, path.Join(tmp, ManifestFile), append(b, '\n')); err != nil {
			return nil, fmt.Errorf("%s: write manifest: %w", where, err)
		}
		dir := path.Join(s.dir, name, strconv.Itoa(n))
		err = s.fs.Rename(ctx, tmp, dir)
		if err == nil {
			return &Version{Name: name, Number: n, Dir: dir, ModelPath: path.Join(dir, ModelFile), URI: s.base + dir, Manifest: m}, nil
		}
		if _, serr := s.fs.Stat(ctx, dir); serr != nil {
			// The version is still free: the rename failed for itself.
			return nil, fmt.Errorf("%s: rename %s to version %d: %w", where, tmp, n, err)
		}
		// Another publisher took n first: try the next number.
	}
	return nil, fmt.Errorf("%s: gave up after %d versions were taken by concurrent publishers", where, maxPublishAttempts)
}

// copyFile copies src to name inside f, returning its size and sha256.
func copyFile(ctx context.Context, f fsys.FS, name string, src Source) (File, error) {
	r, err := src.Open(ctx)
	if err != nil {
		return File{}, err
	}
	defer r.Close()
	w, err := f.CreateAtomic(ctx, name)
	if err != nil {
		return File{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), &ctxReader{ctx: ctx, r: r})
	if err != nil {
		w.Abort()
		return File{}, err
	}
	if err := w.Commit(); err != nil {
		return File{}, err
	}
	return File{Path: src.Path, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// WriteDir writes srcs and m (as manifest.json, last) into dir inside f,
// outside any store: what spindle model export --out writes. Each file
// appears whole or not at all; m.Files is filled in.
func WriteDir(ctx context.Context, f fsys.FS, dir string, srcs []Source, m Manifest) (Manifest, error) {
	if err := checkSources(srcs); err != nil {
		return m, fmt.Errorf("write %s: %w", dir, err)
	}
	if m.Format == "" {
		m.Format = FormatONNX
	}
	if m.Created == "" {
		m.Created = now()
	}
	if err := f.MkdirAll(ctx, dir); err != nil {
		return m, fmt.Errorf("create %s: %w", dir, err)
	}
	m.Files = nil
	for _, src := range srcs {
		file, err := copyFile(ctx, f, path.Join(dir, src.Path), src)
		if err != nil {
			return m, fmt.Errorf("write %s: %w", path.Join(dir, src.Path), err)
		}
		m.Files = append(m.Files, file)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, fmt.Errorf("encode manifest: %w", err)
	}
	if err := writeFile(ctx, f, path.Join(dir, ManifestFile), append(b, '\n')); err != nil {
		return m, fmt.Errorf("write %s: %w", path.Join(dir, ManifestFile), err)
	}
	return m, nil
}

// ctxReader stops a long copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// writeFile writes b to name atomically, replacing what is there.
func writeFile(ctx context.Context, f fsys.FS, name string, b []byte) error {
	w, err := f.CreateAtomic(ctx, name)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

// removeAll removes dir and everything under it.
func removeAll(ctx context.Context, f fsys.FS, dir string) error {
	infos, err := f.ReadDir(ctx, dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, fi := range infos {
		p := path.Join(dir, fi.Name())
		if fi.IsDir() {
			err = removeAll(ctx, f, p)
		} else {
			err = f.Remove(ctx, p)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := f.Remove(ctx, dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// randomSuffix names a publisher's hidden directory.
func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
