package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
)

// Sentinel errors, wrapped with the store, model and version they are about.
var (
	// ErrNoModel says the store holds no model of that name.
	ErrNoModel = errors.New("store: no such model")
	// ErrNoVersion says the model has no version of that number (or none at all).
	ErrNoVersion = errors.New("store: no such version")
	// ErrNoStore says no model store was named, or a reference is malformed.
	ErrNoStore = errors.New("store: no model store")
	// ErrBadName says a model name or version is not one the store can hold.
	ErrBadName = errors.New("store: bad model name")
)

// Store is a model store: a directory of models on one file system. It
// holds no open resources of its own and is safe for concurrent use.
type Store struct {
	fs   fsys.FS
	dir  string // the store's directory inside fs
	base string // prefix making a name inside fs a URI ("" for a local store)
}

// Version is one published version of a model.
type Version struct {
	// Name and Number place the version in its store.
	Name   string
	Number int
	// Dir is the version's directory and ModelPath its model.onnx, as
	// names inside the store's file system (Store.FS).
	Dir, ModelPath string
	// URI is Dir as a URI (a plain path for a local store), for messages
	// and for other processes.
	URI string
	// Manifest is the version's manifest.json.
	Manifest Manifest
}

// Ref returns "NAME/VERSION".
func (v *Version) Ref() string { return fmt.Sprintf("%s/%d", v.Name, v.Number) }

// Open returns the store at dir inside files (a slash path). The
// directory need not exist yet: Publish creates it, and reading a store
// that does not exist says so.
func Open(ctx context.Context, files fsys.FS, dir string) (*Store, error) {
	if files == nil {
		return nil, errors.New("model store: no file system")
	}
	if dir == "" || !path.IsAbs(dir) {
		return nil, fmt.Errorf("model store %q: want an absolute path", dir)
	}
	s := &Store{fs: files, dir: path.Clean(dir)}
	if err := s.checkDir(ctx); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return s, nil
}

// OpenURI returns the store at uri (a path, file:// or hdfs:// URI),
// reached through r.
func OpenURI(ctx context.Context, r *fsys.Resolver, uri string) (*Store, error) {
	if strings.TrimSpace(uri) == "" {
		return nil, fmt.Errorf("no model store: set spindle.models.dir (or give STORE/NAME): %w", ErrNoStore)
	}
	f, name, err := r.Resolve(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("model store %s: %w", uri, err)
	}
	s, err := Open(ctx, f, name)
	if err != nil {
		return nil, err
	}
	if scheme, authority, _, _ := fsys.SplitURI(uri); scheme != "file" {
		s.base = scheme + "://" + authority
	}
	return s, nil
}

// FS returns the file system the store lives on.
func (s *Store) FS() fsys.FS { return s.fs }

// Dir returns the store's directory as a URI (a plain path when local).
func (s *Store) Dir() string { return s.base + s.dir }

// checkDir fails when the store's directory is something else than a directory.
func (s *Store) checkDir(ctx context.Context) error {
	fi, err := s.fs.Stat(ctx, s.dir)
	if err != nil {
		return fmt.Errorf("model store %s: %w", s.Dir(), err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("model store %s: not a directory", s.Dir())
	}
	return nil
}

// List returns the names of the store's models, sorted. A model whose
// publishes all failed (only hidden directories) is still listed; its
// Versions are empty.
func (s *Store) List(ctx context.Context) ([]string, error) {
	if err := s.checkDir(ctx); err != nil {
		return nil, err
	}
	infos, err := s.fs.ReadDir(ctx, s.dir)
	if err != nil {
		return nil, fmt.Errorf("model store %s: list models: %w", s.Dir(), err)
	}
	var names []string
	for _, fi := range infos {
		if fi.IsDir() && CheckName(fi.Name()) == nil {
			names = append(names, fi.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Versions returns the numbers of name's complete versions, oldest first.
func (s *Store) Versions(ctx context.Context, name string) ([]int, error) {
	if err := CheckName(name); err != nil {
		return nil, fmt.Errorf("model store %s: %w", s.Dir(), err)
	}
	infos, err := s.fs.ReadDir(ctx, path.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model store %s: model %s: %w", s.Dir(), name, ErrNoModel)
	}
	if err != nil {
		return nil, fmt.Errorf("model store %s: list versions of %s: %w", s.Dir(), name, err)
	}
	var vs []int
	for _, fi := range infos {
		if n, ok := versionNumber(fi.Name()); ok && fi.IsDir() {
			vs = append(vs, n)
		}
	}
	sort.Ints(vs)
	return vs, nil
}

// versionNumber parses a version directory's name: 1, 2, 3, ... with no
// sign or leading zero, so that each number has one spelling.
func versionNumber(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// ParseRef splits "NAME" or "NAME/VERSION"; version 0 means the latest.
func ParseRef(ref string) (name string, version int, err error) {
	name, v, hasVersion := strings.Cut(ref, "/")
	if err := CheckName(name); err != nil {
		return "", 0, err
	}
	if !hasVersion {
		return name, 0, nil
	}
	n, ok := versionNumber(v)
	if !ok {
		return "", 0, fmt.Errorf("model %q: version %q: want a number from 1: %w", ref, v, ErrBadName)
	}
	return name, n, nil
}

// Resolve returns the version ref names: "NAME" (its latest version) or
// "NAME/VERSION".
func (s *Store) Resolve(ctx context.Context, ref string) (*Version, error) {
	name, n, err := ParseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("model store %s: %w", s.Dir(), err)
	}
	if n == 0 {
		vs, err := s.Versions(ctx, name)
		if err != nil {
			return nil, err
		}
		if len(vs) == 0 {
			return nil, fmt.Errorf("model store %s: model %s has no complete version: %w", s.Dir(), name, ErrNoVersion)
		}
		n = vs[len(vs)-1]
	}
	return s.version(ctx, name, n)
}

// version reads version n of name.
func (s *Store) version(ctx context.Context, name string, n int) (*Version, error) {
	dir := path.Join(s.dir, name, strconv.Itoa(n))
	where := fmt.Sprintf("model store %s: model %s version %d", s.Dir(), name, n)
	b, err := readFile(ctx, s.fs, path.Join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := s.fs.Stat(ctx, path.Join(s.dir, name)); errors.Is(serr, fs.ErrNotExist) {
			return nil, fmt.Errorf("model store %s: model %s: %w", s.Dir(), name, ErrNoModel)
		}
		return nil, fmt.Errorf("%s: %w", where, ErrNoVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", where, ManifestFile, err)
	}
	m, err := decodeManifest(b, where+": "+ManifestFile)
	if err != nil {
		return nil, err
	}
	return &Version{Name: name, Number: n, Dir: dir, ModelPath: path.Join(dir, ModelFile),
		URI: s.base + dir, Manifest: *m}, nil
}

// maxManifest bounds what readFile reads: a manifest is a few KiB.
const maxManifest = 16 << 20

// readFile reads a small file whole.
func readFile(ctx context.Context, f fsys.FS, name string) ([]byte, error) {
	r, err := f.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.Size() > maxManifest {
		return nil, fmt.Errorf("%s: %d bytes, more than a manifest can be", name, r.Size())
	}
	return io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
}
