package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/model/convert"
	"github.com/spindle-ml/spindle/model/store"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/task"
)

// errBadModel marks an --init-model this job cannot start from: missing,
// or with a table that differs from the job's. sparse-lr exits 2 for it.
var errBadModel = errors.New("bad --init-model")

// initFromModel starts the tables from the ONNX model ref names: worker 0
// writes the model's table as a checkpoint under the job's checkpoint
// directory (ps-init/), and every worker restores it before training.
func initFromModel(ctx context.Context, c *client.Client, env task.Env, spec *ps.TableSpec, ref string, files *fsys.Resolver) error {
	if env.CheckpointDir == "" {
		return fmt.Errorf("%w: --init-model needs the job's checkpoint directory (spindle submit --checkpoint-dir), where the servers read the model's table", errBadModel)
	}
	base := strings.TrimRight(env.CheckpointDir, "/") + "/ps-init"
	if c.Worker() == 0 {
		m, where, err := convert.OpenModel(ctx, files, os.Getenv(store.EnvDir), ref)
		if err != nil {
			return badModel(fmt.Errorf("--init-model %s: %w", ref, err))
		}
		t, err := convert.TableFromONNX(m, where, spec.Name)
		if err != nil {
			return badModel(fmt.Errorf("--init-model: %w", err))
		}
		replicas, _ := strconv.Atoi(os.Getenv("SPINDLE_PS_REPLICAS"))
		if _, err := convert.SeedPS(ctx, files, base, where, c.Servers(), replicas, spec, t); err != nil {
			return badModel(fmt.Errorf("--init-model: %w", err))
		}
	}
	// The others wait for worker 0's checkpoint; the servers load it once.
	for {
		_, ok, err := c.Restore(ctx, base, files)
		if err != nil {
			return fmt.Errorf("--init-model %s: %w", ref, err)
		}
		if ok {
			fmt.Printf("sparse-lr: worker %d starts from model %s\n", c.Worker(), ref)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// badModel marks err as the user's when it names something missing or
// mismatched.
func badModel(err error) error {
	for _, bad := range []error{fs.ErrNotExist, store.ErrNoModel, store.ErrNoVersion, store.ErrNoStore, store.ErrBadName, convert.ErrMismatch, convert.ErrNoTable} {
		if errors.Is(err, bad) {
			return fmt.Errorf("%w: %w", errBadModel, err)
		}
	}
	return err
}
