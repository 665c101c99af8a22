package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/task"
)

// position is where a batch stands in the feed: its epoch and its index
// in the epoch.
type position struct {
	epoch int
	batch int64
}

func (p position) before(q position) bool {
	return p.epoch < q.epoch || (p.epoch == q.epoch && p.batch < q.batch)
}

// trainer runs the steps. When a rank is lost and replaced alone
// (spindle.failure.replaceWorkers), the survivors rejoin its replacement
// at the step that failed and every rank catches up with the survivor
// that got furthest: its model, and the position of the batch it trains
// next, which the others' feeds skip to (the replacement's from the start
// of its feed, a survivor one step behind past the batch it had taken).
type trainer struct {
	env    task.Env
	m      *model
	sync   gradientSync
	lr, l2 float64
	// steps counts the steps this process completed; -1 in a replacement
	// until it caught up.
	steps int64
	// target, when catching, is the position the feed skips to.
	target   position
	catching bool
	// replaced is set in a replacement until its first step.
	replaced bool
}

// start is where the feed's epoch begins: past the batches a resumed
// checkpoint consumed, in its first epoch.
func (t *trainer) start(epoch int) int64 {
	if epoch == t.env.FeedStartEpoch {
		return t.env.FeedStartBatch
	}
	return 0
}

// joinReplaced catches up, before the first step, in a communicator
// where a rank was replaced: a replacement (which has no state) takes the
// model and the position from the survivors; a survivor, which joined
// with it before training, hands them on.
func (t *trainer) joinReplaced(ctx context.Context, epoch int) error {
	if t.env.Replacement > 0 {
		t.steps, t.replaced = -1, true
	}
	if err := t.catchUp(ctx, position{epoch, t.start(epoch)}); err != nil {
		return fmt.Errorf("catch up with a replaced rank before the first step: %w", err)
	}
	if t.replaced {
		fmt.Printf("rank %d replaced: joined at epoch %d batch %d (step %d)\n", t.env.Rank, t.target.epoch, t.target.batch, t.steps)
	} else {
		fmt.Printf("rank %d rejoined a replaced rank: training on at epoch %d batch %d (step %d)\n", t.env.Rank, t.target.epoch, t.target.batch, t.steps)
	}
	return nil
}

// catchUp makes every rank's model the furthest rank's and sets the
// position to skip to; at is the position of the batch this rank would
// train next.
func (t *trainer) catchUp(ctx context.Context, at position) error {
	state := append(append([]float64{float64(at.epoch), float64(at.batch)}, t.m.w...), t.m.b)
	steps, err := t.sync.catchUp(ctx, t.steps, state)
	if err != nil {
		return err
	}
	t.steps = steps
	t.target = position{int(state[0]), int64(state[1])}
	copy(t.m.w, state[2:])
	t.m.b = state[len(state)-1]
	if t.target.before(at) {
		return fmt.Errorf("the furthest rank is at epoch %d batch %d, behind this rank's epoch %d batch %d", t.target.epoch, t.target.batch, at.epoch, at.batch)
	}
	t.catching = at != t.target
	return nil
}

// epochStats accumulates loss and accuracy over an epoch, measured on
// each batch before the step that learns from it.
type epochStats struct {
	batches int64 // every batch the feed gave, trained or skipped
	rows    int64
	lossSum float64
	correct int64
}

func (s epochStats) loss() float64     { return s.lossSum / math.Max(1, float64(s.rows)) }
func (s epochStats) accuracy() float64 { return float64(s.correct) / math.Max(1, float64(s.rows)) }

// trainEpoch trains on the batches of epoch ep, skipping those before the
// position to catch up to.
func (t *trainer) trainEpoch(ctx context.Context, ep *wire.TensorEpoch, epoch int) (epochStats, error) {
	var st epochStats
	grad := make([]float64, len(t.m.w)+1)
	for at := (position{epoch, t.start(epoch)}); ; at.batch++ {
		b, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		if err != nil {
			return st, err
		}
		st.batches++
		if t.catching && at.before(t.target) {
			continue
		}
		t.catching = false
		if err := t.step(ctx, b, grad, at, &st); err != nil {
			return st, err
		}
	}
}

// step trains on batch b at position at: the gradient, averaged over the
// ranks, then the update. When the average loses a rank that is replaced,
// this rank rejoins and catches up; the batch is then trained again with
// the caught-up model, or left when the furthest rank had trained it.
func (t *trainer) step(ctx context.Context, b wire.TensorBatch, grad []float64, at position, st *epochStats) error {
	for {
		// Again on every try: a failed average leaves grad half reduced.
		loss, correct := t.m.gradient(b, grad)
		err := t.sync.average(ctx, grad)
		if err == nil {
			t.m.step(grad, t.lr, t.l2)
			t.steps++
			st.rows += int64(b.Rows)
			st.lossSum += loss
			st.correct += int64(correct)
			if t.replaced {
				t.replaced = false
				fmt.Printf("rank %d replaced: trained step %d at epoch %d batch %d\n", t.env.Rank, t.steps, at.epoch, at.batch)
			}
			return nil
		}
		if err := t.sync.rejoin(ctx, err); err != nil {
			return fmt.Errorf("average gradients: %w", err)
		}
		if err := t.catchUp(ctx, at); err != nil {
			return fmt.Errorf("catch up after rejoining: %w", err)
		}
		fmt.Printf("rank %d rejoined a replaced rank: training on at epoch %d batch %d (step %d)\n", t.env.Rank, t.target.epoch, t.target.batch, t.steps)
		if t.catching {
			return nil
		}
	}
}

// prepare checks an epoch's feed and, before the first, sets up the
// model: from --init-model when nothing was resumed, else zero; a process
// that replaces a lost rank then takes the survivors' model.
func (t *trainer) prepare(ctx context.Context, ep *wire.TensorEpoch, initRef string, first bool) error {
	if _, ok := ep.LabelName(); !ok {
		return errors.New("the feed has no label column; submit with --label-column")
	}
	if t.m == nil && initRef != "" {
		m, err := initModel(ctx, initRef, ep.NumFeatures())
		if err != nil {
			return err
		}
		t.m = m
		fmt.Printf("initialized rank=%d from model %s weights=%s\n", t.env.Rank, initRef, m.fingerprint())
	}
	if t.m == nil {
		t.m = newModel(ep.NumFeatures())
	}
	if len(t.m.w) != ep.NumFeatures() {
		return fmt.Errorf("the checkpoint has %d weights but the feed has %d features", len(t.m.w), ep.NumFeatures())
	}
	if first && t.sync.replaced() {
		return t.joinReplaced(ctx, t.env.FeedStartEpoch)
	}
	return nil
}
