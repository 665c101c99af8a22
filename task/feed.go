package task

import (
	"context"
	"fmt"

	"github.com/spindle-ml/spindle/feed/wire"
)

// feedOf checks that the job feeds in mode.
func (e Env) feedOf(mode wire.Mode, reader string) error {
	switch {
	case e.Feed == "":
		return fmt.Errorf("%w: the job has no input (%s is not set)", ErrNoFeed, EnvFeed)
	case e.FeedMode == mode:
		return nil
	case e.FeedMode == wire.ModeDirect:
		return fmt.Errorf("%w: %s is direct: read the splits named by Env.Direct yourself", ErrNoFeed, EnvFeedMode)
	}
	other := "Env.Batches or Env.ArrowEpochs"
	if e.FeedMode == wire.ModeTensor {
		other = "Env.Tensors or Env.TensorEpochs"
	}
	return fmt.Errorf("%w: %s is %s, so %s cannot read it; use %s (or submit with --feed %s)",
		ErrNoFeed, EnvFeedMode, e.FeedMode, reader, other, mode)
}

// Batches opens the next epoch of an arrow-mode feed. Each call returns
// the next epoch; its Epoch is -1, with no batches, once every epoch has
// been read. Close it when done.
func (e Env) Batches(ctx context.Context) (*wire.ArrowEpoch, error) {
	if err := e.feedOf(wire.ModeArrow, "Env.Batches"); err != nil {
		return nil, err
	}
	ep, err := wire.DialArrow(ctx, e.Feed)
	if err == nil {
		position.opened(e, ep)
	}
	return ep, err
}

// Tensors opens the next epoch of a tensor-mode feed. Each call returns
// the next epoch; its Epoch is -1, with no batches, once every epoch has
// been read. Close it when done.
func (e Env) Tensors(ctx context.Context) (*wire.TensorEpoch, error) {
	if err := e.feedOf(wire.ModeTensor, "Env.Tensors"); err != nil {
		return nil, err
	}
	ep, err := wire.DialTensor(ctx, e.Feed)
	if err == nil {
		position.opened(e, ep)
	}
	return ep, err
}

// ArrowEpochs calls fn with each epoch of an arrow-mode feed in turn, until
// the feed has no epochs left or fn fails. fn need not read an epoch to
// its end; the epoch is closed when fn returns.
func (e Env) ArrowEpochs(ctx context.Context, fn func(ep *wire.ArrowEpoch) error) error {
	return eachEpoch(ctx, e.Batches, fn)
}

// TensorEpochs calls fn with each epoch of a tensor-mode feed in turn,
// until the feed has no epochs left or fn fails. fn need not read an epoch
// to its end; the epoch is closed when fn returns.
func (e Env) TensorEpochs(ctx context.Context, fn func(ep *wire.TensorEpoch) error) error {
	return eachEpoch(ctx, e.Tensors, fn)
}

// epoch is what ArrowEpochs and TensorEpochs need of an open epoch.
type epoch interface {
	Epoch() int
	Close() error
}

// eachEpoch opens epochs one after another and hands each to fn, until an
// epoch past the last one (numbered -1) arrives or fn fails.
func eachEpoch[E epoch](ctx context.Context, open func(context.Context) (E, error), fn func(E) error) error {
	for {
		ep, err := open(ctx)
		if err != nil {
			return err
		}
		if ep.Epoch() < 0 {
			return ep.Close()
		}
		err = fn(ep)
		cerr := ep.Close()
		if err != nil {
			return err
		}
		if cerr != nil {
			return fmt.Errorf("close epoch %d: %w", ep.Epoch(), cerr)
		}
	}
}

// Direct reads the description of this rank's splits in a direct-mode
// feed.
func (e Env) Direct() (wire.DirectSpec, error) {
	if err := e.feedOf(wire.ModeDirect, "Env.Direct"); err != nil {
		return wire.DirectSpec{}, err
	}
	return wire.ReadDirectSpec(e.Feed)
}
