package driver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/task/resume"
)

// resumer finds, at the start of each generation, the newest checkpoint
// every rank finished saving (the checkpoint APIs' records), and where
// each rank's feed stood in it.
type resumer struct {
	dir string
	// since passes over records older than the job when the checkpoint
	// directory holds records of a feed with other settings.
	since time.Time
	// firstGen is the job's first generation: one past the newest any
	// earlier gang recorded in the directory (resume.NextGeneration).
	firstGen int
}

// newResumer checks the feed settings stored in the job's checkpoint
// directory against this job's; nil when the job has no checkpoint
// directory.
func (d *Driver) newResumer(ctx context.Context, plan *feed.JobPlan, target int64, start time.Time) (*resumer, error) {
	c := d.cfg
	if c.CheckpointDir == "" {
		return nil, nil
	}
	fsy, dir, err := d.res.Resolve(ctx, c.CheckpointDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", c.CheckpointDir, err)
	}
	s := resume.Settings{Ranks: c.NumExecutors, TotalRows: plan.TotalRows, BatchRows: c.BatchRows, Shuffle: c.Shuffle,
		Seed: c.Seed, ShuffleBufferRows: c.ShuffleBufferRows, EvenBatches: string(c.EvenBatches), TargetBatches: target}
	ok, why, err := resume.CheckSettings(ctx, fsy, dir, s)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", c.CheckpointDir, err)
	}
	r := &resumer{dir: c.CheckpointDir}
	if r.firstGen, err = resume.NextGeneration(ctx, fsy, dir); err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", c.CheckpointDir, err)
	}
	if r.firstGen > 0 {
		d.logger.Info("the checkpoint directory holds earlier gangs' records: this job's generations continue their numbering",
			"dir", c.CheckpointDir, "first_generation", r.firstGen)
	}
	if c.FailurePolicy == PolicyElastic {
		// Positions mean something only against the deal of the
		// generation that recorded them, which this driver keeps.
		r.since = start
	}
	if !ok {
		d.logger.Warn("the checkpoints already there are not resumed from: a restart resumes only from this job's", "reason", why)
		if err := resume.ReplaceSettings(ctx, fsy, dir, s); err != nil {
			return nil, fmt.Errorf("checkpoint directory %s: %w", c.CheckpointDir, err)
		}
		r.since = start
	}
	return r, nil
}

// firstGeneration is the number of the job's first generation: 0, or
// past the generations of the gangs that wrote to its checkpoint
// directory before, so that no two gangs' records share a generation.
func (d *Driver) firstGeneration() int {
	if d.resumer == nil {
		return 0
	}
	return d.resumer.firstGen
}

// resumePoint returns the checkpoint a generation of slots resumes from,
// or nil, and says so: for every rank, or for the replacement of rank only
// when only is not negative.
func (d *Driver) resumePoint(ctx context.Context, r *resumer, slots []slot, only int) (*resume.Point, error) {
	if r == nil {
		return nil, nil
	}
	fsy, dir, err := d.res.Resolve(ctx, r.dir)
	if err != nil {
		return nil, fmt.Errorf("find the checkpoint to resume from in %s: %w", r.dir, err)
	}
	fed := make([]bool, len(slots))
	for i, s := range slots {
		fed[i] = s.role.Feeds() && len(d.cfg.Inputs) > 0
	}
	p, skipped, err := resume.Latest(ctx, fsy, dir, len(slots), fed, r.since)
	if err != nil {
		return nil, fmt.Errorf("find the checkpoint to resume from: %w", err)
	}
	for _, s := range skipped {
		d.logger.Info("checkpoint not resumed from", "why", s)
	}
	if p != nil {
		var at []string
		for rank, pos := range p.Feed {
			if pos != nil && (only < 0 || rank == only) {
				at = append(at, fmt.Sprintf("rank %d at %s", rank, pos))
			}
		}
		d.logger.Info("resuming from checkpoint", "checkpoint", p.Checkpoint, "step", p.Step, "feed", strings.Join(at, ", "), "rank", only)
		if c := d.cfg.Console; c != nil {
			msg := fmt.Sprintf("resuming from checkpoint %s (step %d)", p.Checkpoint, p.Step)
			if only >= 0 {
				msg = fmt.Sprintf("rank %d's replacement resumes from checkpoint %s (step %d)", only, p.Checkpoint, p.Step)
			}
			if len(at) > 0 {
				msg += "; feed: " + strings.Join(at, ", ")
			}
			c.Eprintln(msg)
		}
	}
	return p, nil
}

// resumeFrom is where a generation of slots (not elastic) starts: the
// newest complete checkpoint, each rank's feed at its recorded position.
func (d *Driver) resumeFrom(ctx context.Context, slots []slot) (*genStart, error) {
	return d.resumeFromFor(ctx, slots, -1)
}

// resumeFromFor is resumeFrom for the replacement of rank only (every
// rank when negative).
func (d *Driver) resumeFromFor(ctx context.Context, slots []slot, only int) (*genStart, error) {
	p, err := d.resumePoint(ctx, d.resumer, slots, only)
	if err != nil || p == nil {
		return nil, err
	}
	from := &genStart{checkpoint: p.Checkpoint, step: p.Step, feed: make([]*rankStart, len(p.Feed))}
	for r, pos := range p.Feed {
		if pos != nil {
			from.feed[r] = &rankStart{epoch: pos.Epoch, batch: pos.Batches}
		}
	}
	return from, nil
}

// replacementStart is where the replacement of rank (the replacement'th
// in generation gen) starts: the newest complete checkpoint, pinned for it
// (resume.Pin), so that the ranks that kept running do not prune it before
// the replacement has loaded it.
func (d *Driver) replacementStart(ctx context.Context, slots []slot, gen, rank, replacement int) (*genStart, error) {
	const tries = 3
	for try := 1; ; try++ {
		from, err := d.resumeFromFor(ctx, slots, rank)
		if err != nil || from == nil {
			return from, err
		}
		fsy, dir, err := d.res.Resolve(ctx, d.resumer.dir)
		if err != nil {
			return nil, fmt.Errorf("pin checkpoint %s for rank %d's replacement: %w", from.checkpoint, rank, err)
		}
		ok, err := resume.PinFor(ctx, fsy, dir, from.checkpoint, resume.Pin{Rank: rank, Generation: gen, Replacement: replacement})
		if err != nil {
			// The pin only guards against pruning: the replacement
			// can still load the checkpoint, and fails saying so if
			// it is gone.
			d.logger.Warn("could not pin the replacement's checkpoint; pruning may delete it before it is loaded",
				"rank", rank, "checkpoint", from.checkpoint, "err", err)
			return from, nil
		}
		if ok {
			return from, nil
		}
		if try == tries {
			return nil, fmt.Errorf("choose the checkpoint rank %d's replacement resumes from: the newest complete one was pruned before it could be pinned, %d times", rank, tries)
		}
		d.logger.Info("the checkpoint chosen for the replacement was pruned before it was pinned; choosing again", "rank", rank, "checkpoint", from.checkpoint)
	}
}
