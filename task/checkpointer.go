package task

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/task/resume"
)

// FeedPosition is where this process's feed stands: Batches batches of
// epoch Epoch consumed (returned by Next). An epoch read to its end puts
// the position at the start of the next one.
type FeedPosition struct {
	Epoch   int
	Batches int64
}

// feedTracker follows the epoch a process opened last, for checkpoints.
type feedTracker struct {
	mu    sync.Mutex
	ep    takenEpoch // nil before the first epoch
	base  int64      // batches of ep consumed before this generation
	epoch int
	// told is the position a process reading a direct-mode feed itself
	// last gave (Env.SetFeedPosition); nil when it gave none.
	told *FeedPosition
}

type takenEpoch interface {
	Epoch() int
	Taken() wire.Taken
}

// position is the process's feed tracker: a process has one feed.
var position feedTracker

// opened notes an epoch the process opened through Env.
func (t *feedTracker) opened(e Env, ep takenEpoch) {
	if ep.Epoch() < 0 {
		return // the end of the feed: the last epoch's position stands
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ep, t.epoch, t.base = ep, ep.Epoch(), 0
	if ep.Epoch() == e.FeedStartEpoch {
		t.base = e.FeedStartBatch
	}
}

// FeedPosition returns where the process's feed (arrow or tensor mode,
// opened through Env.Batches, Env.Tensors or their Epochs helpers)
// stands: before the first epoch is opened, where the feed starts
// (FeedStartEpoch, FeedStartBatch). A process reading a direct-mode feed
// itself says where it stands with SetFeedPosition.
func (e Env) FeedPosition() FeedPosition {
	position.mu.Lock()
	defer position.mu.Unlock()
	if position.told != nil {
		return *position.told
	}
	if position.ep == nil {
		return FeedPosition{Epoch: e.FeedStartEpoch, Batches: e.FeedStartBatch}
	}
	tk := position.ep.Taken()
	if tk.End {
		return FeedPosition{Epoch: position.epoch + 1}
	}
	return FeedPosition{Epoch: position.epoch, Batches: position.base + tk.Batches}
}

// SetFeedPosition tells the Checkpointer where a direct-mode feed that the
// process reads itself stands: p.Batches batches of epoch p.Epoch taken
// (an epoch read to its end is the start of the next, p.Batches 0). Such a
// process starts reading at FeedStartEpoch, without the first
// FeedStartBatch batches of it (Env.Direct's StartEpoch and StartBatch),
// and calls SetFeedPosition after each batch it takes; the checkpoints it
// saves then record where its feed stood, and a restarted job resumes
// each rank's feed from there, as for the socket feeds, whose position
// the package follows by itself.
func (e Env) SetFeedPosition(p FeedPosition) {
	position.mu.Lock()
	defer position.mu.Unlock()
	position.told = &p
}

// CheckpointOptions configure a Checkpointer.
type CheckpointOptions struct {
	// Prefix names the checkpoints: Prefix-STEP. Empty means "ckpt".
	Prefix string
	// EverySteps and Every say when Due (and MaybeSave) save: at steps
	// that are multiples of EverySteps, or once Every of time has passed
	// since the last save (or the start). With both zero, every step is
	// due.
	EverySteps int64
	Every      time.Duration
	// PerRank makes every rank save a file of its own
	// (Prefix-STEP.rank-R); otherwise rank 0 saves the checkpoint and the
	// other ranks only record their feed position.
	PerRank bool
	// Keep is how many complete checkpoints of Prefix stay: once a
	// checkpoint this Checkpointer saved is complete, the rank whose
	// record completed it deletes the older complete ones beyond the Keep
	// most recently completed. 0 takes the job's Env.CheckpointKeep
	// (spindle.checkpoint.keep); a negative Keep keeps every one. A
	// checkpoint not every rank has recorded (one being written) is never
	// deleted, nor one the driver handed a worker replaced alone until
	// that worker has recorded a newer one (resume.Pin).
	Keep int
}

// DefaultCheckpointKeep is spindle.checkpoint.keep's default: the complete
// checkpoints of a prefix a Checkpointer keeps.
const DefaultCheckpointKeep = 3

// Checkpointer saves numbered checkpoints in the job's checkpoint
// directory, atomically, with the feed's position beside them, and loads
// the one a restarted job resumes from. Every rank calls Save (or
// MaybeSave) for the same steps: a checkpoint counts as complete, and
// the driver resumes from it, only once every fed rank has saved it, so
// the model and every rank's feed continue from the same step, no row fed
// twice or skipped within an epoch.
//
// The position saved is Env.FeedPosition: save after the step that used
// the last batch taken, before taking the next.
type Checkpointer struct {
	env      Env
	opts     CheckpointOptions
	lastStep int64
	lastTime time.Time
}

// Checkpointer returns a Checkpointer for the job's checkpoint directory.
func (e Env) Checkpointer(opts CheckpointOptions) (*Checkpointer, error) {
	if e.CheckpointDir == "" {
		return nil, ErrNoCheckpointDir
	}
	if opts.Prefix == "" {
		opts.Prefix = "ckpt"
	}
	if err := resume.CheckName(opts.Prefix); err != nil {
		return nil, fmt.Errorf("task: checkpoint prefix: %w", err)
	}
	if opts.EverySteps < 0 || opts.Every < 0 {
		return nil, fmt.Errorf("task: checkpoint every %d steps or %s: must not be negative", opts.EverySteps, opts.Every)
	}
	return &Checkpointer{env: e, opts: opts, lastTime: time.Now()}, nil
}

// Name returns the name of the checkpoint of step.
func (c *Checkpointer) Name(step int64) string {
	return c.opts.Prefix + "-" + strconv.FormatInt(step, 10)
}

// file is the checkpoint file this rank saves or loads for step.
func (c *Checkpointer) file(step int64) string {
	if c.opts.PerRank {
		return c.Name(step) + ".rank-" + strconv.Itoa(c.env.Rank)
	}
	return c.Name(step)
}

// Resume loads the checkpoint the driver chose for this generation (the
// newest complete one; Env.ResumeCheckpoint) through read and returns its
// step. ok is false, and read is not called, when the job starts afresh.
func (c *Checkpointer) Resume(ctx context.Context, read func(io.Reader) error) (step int64, ok bool, err error) {
	e := c.env
	if e.ResumeCheckpoint == "" {
		return 0, false, nil
	}
	if want := c.Name(e.ResumeStep); e.ResumeCheckpoint != want {
		return 0, false, fmt.Errorf("task: the job resumes from checkpoint %s, which this Checkpointer (prefix %q) did not save: want %s",
			e.ResumeCheckpoint, c.opts.Prefix, want)
	}
	if err := e.LoadCheckpoint(ctx, c.file(e.ResumeStep), read); err != nil {
		return 0, false, err
	}
	c.lastStep, c.lastTime = e.ResumeStep, time.Now()
	return e.ResumeStep, true, nil
}

// Due reports whether step is due for a checkpoint.
func (c *Checkpointer) Due(step int64) bool {
	o := c.opts
	if o.EverySteps == 0 && o.Every == 0 {
		return true
	}
	// Steps that are multiples of EverySteps, so that every rank, whatever
	// it resumed from, saves the same ones.
	return (o.EverySteps > 0 && step%o.EverySteps == 0 && step != c.lastStep) || (o.Every > 0 && time.Since(c.lastTime) >= o.Every)
}

// MaybeSave saves checkpoint step when it is due, and says whether it did.
// With a time-based schedule, ranks must agree on whether a step is due
// (rank 0 decides and tells the others, or use EverySteps).
func (c *Checkpointer) MaybeSave(ctx context.Context, step int64, write func(io.Writer) error) (bool, error) {
	if !c.Due(step) {
		return false, nil
	}
	return true, c.Save(ctx, step, write)
}

// Save saves checkpoint step: this rank's file (rank 0's, or every rank's
// with PerRank) written by write, then the record of this rank's feed
// position. Every rank must call it for the checkpoint to be complete.
func (c *Checkpointer) Save(ctx context.Context, step int64, write func(io.Writer) error) error {
	if step < 0 {
		return fmt.Errorf("task: checkpoint step %d: must not be negative", step)
	}
	e := c.env
	pos := e.FeedPosition()
	rec := resume.Record{Checkpoint: c.Name(step), Step: step, Rank: e.Rank, WorldSize: e.WorldSize,
		Generation: e.Generation, Replacement: e.Replacement, Time: time.Now().UTC()}
	if e.Feed != "" {
		rec.Feed = &resume.Position{Epoch: pos.Epoch, Batches: pos.Batches}
	}
	if c.opts.PerRank || e.Rank == 0 {
		if err := e.SaveCheckpoint(ctx, c.file(step), write); err != nil {
			return err
		}
		rec.Files = []string{c.file(step)}
	}
	// The record goes last: it says the files above are stored.
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	fsy, d, err := res.Resolve(ctx, e.CheckpointDir)
	if err != nil {
		return fmt.Errorf("record checkpoint %s in %s: %w", rec.Checkpoint, e.CheckpointDir, err)
	}
	if err := resume.Write(ctx, fsy, d, rec); err != nil {
		return fmt.Errorf("record checkpoint %s: %w", rec.Checkpoint, err)
	}
	c.lastStep, c.lastTime = step, time.Now()
	if keep := c.keep(); keep > 0 {
		// The checkpoint is saved: a failure to delete old ones costs
		// disk, not the job.
		if removed, err := resume.PruneAfter(ctx, fsy, d, rec.Checkpoint, c.opts.Prefix, keep); err != nil {
			slog.Warn("could not delete old checkpoints", "dir", e.CheckpointDir, "prefix", c.opts.Prefix, "keep", keep, "err", err)
		} else if len(removed) > 0 {
			slog.Debug("deleted old checkpoints", "dir", e.CheckpointDir, "checkpoints", removed, "keep", keep)
		}
	}
	return nil
}

// keep is how many complete checkpoints stay; 0 keeps every one.
func (c *Checkpointer) keep() int {
	switch {
	case c.opts.Keep < 0:
		return 0
	case c.opts.Keep > 0:
		return c.opts.Keep
	}
	return c.env.CheckpointKeep
}
