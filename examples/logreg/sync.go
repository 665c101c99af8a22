package main

import (
	"context"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/task"
)

// gradientSync makes every rank step with the same gradient.
type gradientSync interface {
	average(ctx context.Context, grad []float64) error
	Close() error
}

// newGradientSync joins the job's communicator when there is more than one
// rank. Gradients then travel peer to peer over Spindle's ring allreduce,
// over UCX where the job's RDMA setting selects it (task.Env.Comm).
func newGradientSync(ctx context.Context, env task.Env) (gradientSync, error) {
	if env.WorldSize <= 1 {
		return alone{}, nil
	}
	comm, err := env.Comm(ctx)
	if err != nil {
		return nil, err
	}
	return ring{comm}, nil
}

type alone struct{}

func (alone) average(context.Context, []float64) error { return nil }
func (alone) Close() error                             { return nil }

type ring struct{ comm *collective.Comm }

func (r ring) average(ctx context.Context, grad []float64) error {
	return collective.AllReduce(ctx, r.comm, grad, collective.Mean)
}

func (r ring) Close() error { return r.comm.Close() }
