package predict

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/plan"
	"github.com/spindle-ml/spindle/fsys"
)

// SuccessFile marks an output directory whose every split was written.
const SuccessFile = "_SUCCESS"

// PrepareOutput makes sure the job can write its output at uri before it
// runs: the directory is created when missing; an existing one must be
// empty, or with overwrite is emptied of its files; and a file written
// there must be publishable. Errors wrap ErrBadInput and name the
// directory.
func PrepareOutput(ctx context.Context, res *fsys.Resolver, uri string, overwrite bool) error {
	fsy, dir, err := res.Resolve(ctx, uri)
	if err != nil {
		return fmt.Errorf("%w: --output %s: %w", ErrBadInput, uri, err)
	}
	st, err := fsy.Stat(ctx, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := fsy.MkdirAll(ctx, dir); err != nil {
			return fmt.Errorf("%w: --output %s: create the directory: %w", ErrBadInput, uri, err)
		}
	case err != nil:
		return fmt.Errorf("%w: --output %s: %w", ErrBadInput, uri, err)
	case !st.IsDir():
		return fmt.Errorf("%w: --output %s is a file; name a directory", ErrBadInput, uri)
	default:
		if err := emptyOutput(ctx, fsy, dir, uri, overwrite); err != nil {
			return err
		}
	}
	probe := path.Join(dir, "_spindle_write_check")
	w, err := fsy.CreateAtomic(ctx, probe)
	if err == nil {
		if _, err = w.Write([]byte("ok\n")); err == nil {
			err = w.Commit()
		} else {
			_ = w.Abort()
		}
	}
	if err != nil {
		return fmt.Errorf("%w: --output %s: cannot write there: %w", ErrBadInput, uri, err)
	}
	if err := fsy.Remove(ctx, probe); err != nil {
		return fmt.Errorf("%w: --output %s: remove %s: %w", ErrBadInput, uri, probe, err)
	}
	return nil
}

// emptyOutput refuses a non-empty output directory or, with overwrite,
// removes its files. A subdirectory is never removed.
func emptyOutput(ctx context.Context, fsy fsys.FS, dir, uri string, overwrite bool) error {
	entries, err := fsy.ReadDir(ctx, dir)
	if err != nil {
		return fmt.Errorf("%w: --output %s: cannot list it: %w", ErrBadInput, uri, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if !overwrite {
		return fmt.Errorf("%w: --output %s is not empty (%d entries, %s first): name a new directory, or pass --overwrite to replace its files",
			ErrBadInput, uri, len(entries), entries[0].Name())
	}
	for _, e := range entries {
		if e.IsDir() {
			return fmt.Errorf("%w: --output %s holds directory %s; --overwrite replaces files only: remove it first", ErrBadInput, uri, e.Name())
		}
	}
	for _, e := range entries {
		if err := fsy.Remove(ctx, path.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("%w: --output %s: remove %s: %w", ErrBadInput, uri, e.Name(), err)
		}
	}
	return nil
}

// FinishOutput ends a successful job's output: it removes the temporary
// files killed workers left and the driver's resume records (hidden
// names), checks that the Parquet files
// hold wantRows rows (when wantRows > 0), and writes _SUCCESS.
func FinishOutput(ctx context.Context, res *fsys.Resolver, uri string, wantRows int64) (int64, error) {
	fsy, dir, err := res.Resolve(ctx, uri)
	if err != nil {
		return 0, err
	}
	entries, err := fsy.ReadDir(ctx, dir)
	if err != nil {
		return 0, fmt.Errorf("list the output %s: %w", uri, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			continue
		}
		// Temporary files, and the resume records the driver keeps in a
		// remote output (its checkpoint directory).
		if err := removeTree(ctx, fsy, path.Join(dir, e.Name()), e.IsDir()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("remove the leftover %s from the output %s: %w", e.Name(), uri, err)
		}
	}
	jp, err := plan.Plan(ctx, res, feed.PlanRequest{Inputs: []string{uri}, Format: feed.FormatParquet, Ranks: 1, RetryUnavailable: -1})
	if err != nil {
		return 0, fmt.Errorf("count the rows of the output %s: %w", uri, err)
	}
	if wantRows > 0 && jp.TotalRows != wantRows {
		return jp.TotalRows, fmt.Errorf("the output %s holds %d rows, the input %d", uri, jp.TotalRows, wantRows)
	}
	w, err := fsy.CreateAtomic(ctx, path.Join(dir, SuccessFile))
	if err != nil {
		return jp.TotalRows, fmt.Errorf("write %s in %s: %w", SuccessFile, uri, err)
	}
	if err := w.Commit(); err != nil {
		return jp.TotalRows, fmt.Errorf("write %s in %s: %w", SuccessFile, uri, err)
	}
	return jp.TotalRows, nil
}

// removeTree removes name and, when it is a directory, what it holds.
func removeTree(ctx context.Context, fsy fsys.FS, name string, dir bool) error {
	if dir {
		entries, err := fsy.ReadDir(ctx, name)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := removeTree(ctx, fsy, path.Join(name, e.Name()), e.IsDir()); err != nil {
				return err
			}
		}
	}
	return fsy.Remove(ctx, name)
}
