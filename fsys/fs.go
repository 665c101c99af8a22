package fsys

import (
	"context"
	"io"
	"io/fs"
)

// FS is a file system holding training inputs, shipped files, checkpoints
// and outputs. Names are slash-separated absolute paths inside the file
// system (the path part of a URI). Errors follow the os package: a missing
// file satisfies errors.Is(err, fs.ErrNotExist), and so on.
type FS interface {
	// Open opens a file for random-access reading.
	Open(ctx context.Context, name string) (File, error)
	// Stat describes a file or directory.
	Stat(ctx context.Context, name string) (fs.FileInfo, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(ctx context.Context, name string) ([]fs.FileInfo, error)
	// Glob returns the names matching pattern (path.Match syntax in every
	// element), sorted. A pattern without meta characters matches itself
	// when it exists.
	Glob(ctx context.Context, pattern string) ([]string, error)
	// CreateTemp creates a new file to be published under name by
	// AtomicFile.Commit; until then name is untouched.
	CreateAtomic(ctx context.Context, name string) (AtomicFile, error)
	// MkdirAll creates a directory and its parents.
	MkdirAll(ctx context.Context, name string) error
	// Rename renames a file, replacing the target where the file system allows it.
	Rename(ctx context.Context, from, to string) error
	// Remove removes a file or an empty directory.
	Remove(ctx context.Context, name string) error
	// Locations returns, for the byte range [off, off+length) of a file,
	// the hosts that hold its bytes, the host holding the most bytes first.
	// Local files have no locations.
	Locations(ctx context.Context, name string, off, length int64) ([]string, error)
}

// File is an open file for random-access reads.
type File interface {
	io.ReaderAt
	io.ReadSeeker
	io.Closer
	Size() int64
}

// AtomicFile is a file being written that becomes visible under its final
// name only on Commit. Abort (or Close without Commit) removes what was
// written; a crash leaves only a temporary name behind, never a file that
// looks complete.
type AtomicFile interface {
	io.Writer
	// Commit flushes, closes and publishes the file under its final name.
	Commit() error
	// Abort discards the file. It is safe after Commit, where it does nothing.
	Abort() error
}

// WriteAtomic writes what r gives to name through CreateAtomic: the file
// appears under name, complete, only if every byte was written.
func WriteAtomic(ctx context.Context, f FS, name string, r io.Reader) error {
	w, err := f.CreateAtomic(ctx, name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}
