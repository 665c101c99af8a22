package testbin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// EnvDir names the variable that points to prebuilt binaries.
const EnvDir = "SPINDLE_TEST_BIN_DIR"

// Bin is one program a test runs: the package that builds it, relative to
// the module root ("./cmd/spindle"), and where Build stores its path.
type Bin struct {
	Out *string
	Pkg string
}

// Build puts every bin's program in dir, named after the last element of
// its package, and sets its Out. Programs found in $SPINDLE_TEST_BIN_DIR
// are linked (or copied) from there; the others are built from the module
// at root with one go build.
func Build(ctx context.Context, root, dir string, bins ...Bin) error {
	return build(ctx, root, dir, os.Getenv(EnvDir), bins)
}

func build(ctx context.Context, root, dir, prebuilt string, bins []Bin) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make the test binaries' directory: %w", err)
	}
	var missing []string
	for _, b := range bins {
		*b.Out = filepath.Join(dir, filepath.Base(b.Pkg))
		if prebuilt == "" {
			missing = append(missing, b.Pkg)
			continue
		}
		err := linkOrCopy(filepath.Join(prebuilt, filepath.Base(b.Pkg)), *b.Out)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, b.Pkg)
		case err != nil:
			return fmt.Errorf("take %s from %s=%s: %w", b.Pkg, EnvDir, prebuilt, err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// With -o naming a directory, go build writes each main package's
	// program into it, linking them side by side.
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", dir + string(filepath.Separator)}, missing...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %v: %w\n%s", missing, err, out)
	}
	return nil
}

// linkOrCopy hard-links src to dst, or copies it where a link cannot be
// made (another file system).
func linkOrCopy(src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}
