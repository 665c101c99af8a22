package main

import (
	"context"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/task"
)

// gradientSync makes every rank step with the same gradient.
type gradientSync interface {
	average(ctx context.Context, grad []float64) error
	// rejoin recovers from err, a failed average that lost a rank, once
	// the rank's replacement is known (spindle.failure.replaceWorkers);
	// it returns err when it cannot.
	rejoin(ctx context.Context, err error) error
	// catchUp hands every rank the state of the rank that completed the
	// most steps (task.CatchUp) and returns that count.
	catchUp(ctx context.Context, step int64, state []float64) (int64, error)
	// replaced says a rank's process was replaced before this one
	// joined: every rank starts with catchUp.
	replaced() bool
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
	return &ring{env: env, comm: comm}, nil
}

type alone struct{}

func (alone) average(context.Context, []float64) error                          { return nil }
func (alone) rejoin(_ context.Context, err error) error                         { return err }
func (alone) catchUp(_ context.Context, step int64, _ []float64) (int64, error) { return step, nil }
func (alone) replaced() bool                                                    { return false }
func (alone) Close() error                                                      { return nil }

type ring struct {
	env  task.Env
	comm *collective.Comm
}

func (r *ring) average(ctx context.Context, grad []float64) error {
	return collective.AllReduce(ctx, r.comm, grad, collective.Mean)
}

func (r *ring) rejoin(ctx context.Context, err error) error {
	comm, err := r.env.Rejoin(ctx, r.comm, err)
	if err != nil {
		return err
	}
	r.comm = comm
	return nil
}

func (r *ring) catchUp(ctx context.Context, step int64, state []float64) (int64, error) {
	return task.CatchUp(ctx, r.comm, step, state)
}

func (r *ring) replaced() bool { return task.Replaced(r.comm) }

func (r *ring) Close() error { return r.comm.Close() }
