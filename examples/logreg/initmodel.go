package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/model/convert"
	"github.com/spindle-ml/spindle/model/store"
)

// errBadModel marks an --init-model that cannot start this job: a missing
// model or one whose shape the feed does not fit. logreg exits 2 for it.
var errBadModel = errors.New("bad --init-model")

// initModel reads the starting weights from the ONNX model ref names (a
// .onnx file, a directory holding model.onnx, or [STORE/]NAME[/VERSION]
// in the job's model store), for a feed of features columns.
func initModel(ctx context.Context, ref string, features int) (*model, error) {
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	m, where, err := convert.OpenModel(ctx, res, os.Getenv(store.EnvDir), ref)
	if err != nil {
		return nil, badModel(fmt.Errorf("--init-model %s: %w", ref, err))
	}
	lr, err := convert.LogRegFromONNX(m, where, features)
	if err != nil {
		return nil, badModel(fmt.Errorf("--init-model: %w", err))
	}
	return &model{w: lr.Weights, b: lr.Bias}, nil
}

// badModel marks err as the user's when it names something missing or
// mismatched rather than a failed read.
func badModel(err error) error {
	for _, bad := range []error{fs.ErrNotExist, store.ErrNoModel, store.ErrNoVersion, store.ErrNoStore, store.ErrBadName, convert.ErrMismatch} {
		if errors.Is(err, bad) {
			return fmt.Errorf("%w: %w", errBadModel, err)
		}
	}
	return err
}
