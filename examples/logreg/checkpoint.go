package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/spindle-ml/spindle/model/convert"
	"github.com/spindle-ml/spindle/task"
)

// checkpointName is the model's file inside SPINDLE_CHECKPOINT_DIR, in
// the format spindle model export reads (convert.LogReg).
const checkpointName = convert.LogRegFile

type checkpoint = convert.LogReg

// saveCheckpoint writes the model from rank 0, atomically, when the job
// has a checkpoint directory.
func saveCheckpoint(ctx context.Context, env task.Env, m *model, epochs int) error {
	if env.CheckpointDir == "" || env.Rank != 0 {
		return nil
	}
	err := task.SaveCheckpoint(ctx, env.CheckpointDir, checkpointName, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(checkpoint{Weights: m.w, Bias: m.b, Epochs: epochs})
	})
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	fmt.Printf("saved checkpoint %s/%s\n", env.CheckpointDir, checkpointName)
	return nil
}

// loadCheckpoint returns the saved model, or nil when there is none.
func loadCheckpoint(ctx context.Context, env task.Env) (*model, error) {
	if env.CheckpointDir == "" {
		return nil, nil
	}
	var c checkpoint
	err := task.LoadCheckpoint(ctx, env.CheckpointDir, checkpointName, func(r io.Reader) error {
		return json.NewDecoder(r).Decode(&c)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	fmt.Printf("resumed from checkpoint %s/%s (%d epochs trained)\n", env.CheckpointDir, checkpointName, c.Epochs)
	return &model{w: c.Weights, b: c.Bias}, nil
}
