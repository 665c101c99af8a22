package executor

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/spindle-ml/spindle/fsys"
)

// localizeFiles copies each URI in files into dir under its base name
// (--files), so the training process finds them in $SPINDLE_FILES_DIR.
func localizeFiles(ctx context.Context, res *fsys.Resolver, files []string, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create files directory: %w", err)
	}
	for _, uri := range files {
		if err := localizeFile(ctx, res, uri, dir); err != nil {
			return fmt.Errorf("localize --files %s: %w", uri, err)
		}
	}
	return nil
}

func localizeFile(ctx context.Context, res *fsys.Resolver, uri, dir string) error {
	fs, name, err := res.Resolve(ctx, uri)
	if err != nil {
		return err
	}
	src, err := openCounted(ctx, fs, name)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := fsys.Local().CreateAtomic(ctx, filepath.ToSlash(filepath.Join(dir, path.Base(name))))
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Abort()
		return err
	}
	if err := dst.Commit(); err != nil {
		return err
	}
	// The copy keeps the file's permission bits (a local file's, or those
	// YARN staging gave its HDFS copy): a shipped program stays
	// executable. Its owner can always read it.
	fi, err := fs.Stat(ctx, name)
	if err != nil {
		return fmt.Errorf("read the mode of %s: %w", uri, err)
	}
	if err := os.Chmod(filepath.Join(dir, path.Base(name)), fi.Mode().Perm()|0o400); err != nil {
		return fmt.Errorf("give %s its mode: %w", uri, err)
	}
	return nil
}
