package testbin

import (
	"context"
	"path/filepath"
	"runtime"
)

// Root is the module's root directory, found from this file's place in
// it, for tests that run the module's programs and scripts.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Setup is what a process-spawning test package's TestMain does first:
// TempDir with prefix (TMPDIR pointed at a directory of the package's
// own), then Build of bins into its bin directory. It returns the
// directory and the cleanup that TestMain runs after m.Run; on an error
// nothing is left behind.
func Setup(ctx context.Context, prefix string, bins ...Bin) (dir string, cleanup func(), err error) {
	dir, cleanup, err = TempDir(prefix)
	if err != nil {
		return "", nil, err
	}
	if err := Build(ctx, Root(), BinDir(dir), bins...); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

// BinDir is where Setup puts the programs of the package whose directory
// is dir.
func BinDir(dir string) string { return filepath.Join(dir, "bin") }
