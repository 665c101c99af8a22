package testbin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// module is the path go.mod declares, which Root looks for.
const module = "github.com/spindle-ml/spindle"

// Root is the module's root directory, for tests that run the module's
// programs and scripts: the nearest directory above the working
// directory (a test's package directory, under go test) whose go.mod
// declares the module. It does not use the source file's recorded path,
// which -trimpath (make test) leaves relative. It panics, naming the
// working directory, outside the module.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("testbin: find the module root: %v", err))
	}
	root, err := rootAbove(dir)
	if err != nil {
		panic(fmt.Sprintf("testbin: %v", err))
	}
	return root
}

// rootAbove returns the nearest of dir and its parents whose go.mod
// declares module.
func rootAbove(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && declares(b, module) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s in %s or above it", module, dir)
		}
	}
}

// declares reports whether a go.mod's module line names mod.
func declares(gomod []byte, mod string) bool {
	for line := range strings.Lines(string(gomod)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == mod
		}
	}
	return false
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
