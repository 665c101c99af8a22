// Command rowcheck is a training process for the recovery tests and the
// chaos harness: it reads a tensor feed whose label column holds row ids,
// keeps a checksum of the ids it took in each epoch, checkpoints that
// state with task.Checkpointer (each rank its own file) every few steps,
// and resumes from the checkpoint a restarted job names. At the end it
// prints one line per epoch:
//
//	rowcheck rank=0 generation=1 epoch=0 rows=500 hash=9f2c0e2a9b3d4411
//
// hash adds rowsum.Hash(id) over the rows taken (mod 2^64); rowsum.Check
// sums the ranks' lines of each epoch. --crash-after makes one rank SIGKILL itself in
// the first generation after that many batches (its first process only,
// not one that replaced it). --crash-rank-pause gives that process a
// shorter pause, so that it records checkpoints ahead of the others, and
// --replacement-delay holds its replacement before it loads the
// checkpoint it resumes from, while the others save on.
//
// With --feed direct it reads its splits itself, in order (no shuffle),
// starting where the generation resumes, and tells the Checkpointer where
// it stands with task.Env.SetFeedPosition.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/task"
	"github.com/spindle-ml/spindle/task/resume"
)

// state is what a checkpoint holds: per epoch, the rows taken and their hash.
type state struct {
	Rows map[int]int64  `json:"rows"`
	Hash map[int]uint64 `json:"hash"`
}

func main() {
	crashRank := flag.Int("crash-rank", 1, "the rank that kills itself")
	crashAfter := flag.Int("crash-after", 0, "in generation 0, SIGKILL the crash rank after this many batches (0: never)")
	every := flag.Int64("every", 5, "checkpoint every this many steps")
	pause := flag.Duration("pause", 0, "work time per batch")
	crashPause := flag.Duration("crash-rank-pause", -1, "the crash rank's first process's work time per batch (negative: --pause)")
	delay := flag.Duration("replacement-delay", 0, "a replacement waits this long before loading its checkpoint")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := options{crashRank: *crashRank, crashAfter: *crashAfter, every: *every, pause: *pause, crashPause: *crashPause, delay: *delay}
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "rowcheck: %v\n", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	crashRank, crashAfter    int
	every                    int64
	pause, crashPause, delay time.Duration
}

func run(ctx context.Context, o options) error {
	env, err := task.FromEnv()
	if err != nil {
		return err
	}
	ck, err := env.Checkpointer(task.CheckpointOptions{Prefix: "rows", EverySteps: o.every, PerRank: true})
	if err != nil {
		return err
	}
	first := env.Generation == 0 && env.Replacement == 0
	if env.Replacement > 0 && o.delay > 0 {
		time.Sleep(o.delay)
	}
	pause := o.pause
	if first && env.Rank == o.crashRank && o.crashPause >= 0 {
		pause = o.crashPause
	}
	st := state{Rows: map[int]int64{}, Hash: map[int]uint64{}}
	step, resumed, err := resumeState(ctx, env, ck, o.every, &st)
	if err != nil {
		return err
	}
	// The tests tell a rank that kept running from one started again.
	fmt.Printf("rowcheck rank=%d pid=%d generation=%d replacement=%d started\n", env.Rank, os.Getpid(), env.Generation, env.Replacement)
	if resumed {
		fmt.Printf("rowcheck rank=%d resumed from %s step %d, feed at epoch %d batch %d\n",
			env.Rank, env.ResumeCheckpoint, step, env.FeedStartEpoch, env.FeedStartBatch)
	}
	taken := 0
	save := func(w io.Writer) error { return json.NewEncoder(w).Encode(st) }
	// take counts one batch of ids of epoch e, and checkpoints when due.
	take := func(e int, ids []float64) error {
		for _, id := range ids {
			st.Rows[e]++
			st.Hash[e] += rowsum.Hash(uint64(id))
		}
		if pause > 0 {
			time.Sleep(pause) // stands for the work of a training step
		}
		step++
		taken++
		if first && env.Rank == o.crashRank && o.crashAfter > 0 && taken == o.crashAfter {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		_, err := ck.MaybeSave(ctx, step, save)
		return err
	}
	if env.FeedMode == wire.ModeDirect {
		if err := readDirect(ctx, env, take); err != nil {
			return err
		}
	}
	for env.FeedMode != wire.ModeDirect {
		ep, err := env.Tensors(ctx)
		if err != nil {
			return err
		}
		if ep.Epoch() < 0 {
			ep.Close()
			break
		}
		for {
			b, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				ep.Close()
				return fmt.Errorf("epoch %d: %w", ep.Epoch(), err)
			}
			if b.Labels == nil {
				ep.Close()
				return errors.New("the feed has no label column (submit with --label-column id)")
			}
			ids := make([]float64, len(b.Labels))
			for i, id := range b.Labels {
				ids[i] = float64(id)
			}
			if err := take(ep.Epoch(), ids); err != nil {
				ep.Close()
				return err
			}
		}
		ep.Close()
	}
	for e := 0; e < len(st.Rows); e++ {
		fmt.Printf("rowcheck rank=%d generation=%d epoch=%d rows=%d hash=%016x\n", env.Rank, env.Generation, e, st.Rows[e], st.Hash[e])
	}
	return nil
}

// resumeState loads the checkpoint the generation resumes from into st
// and returns its step, and whether there was one.
func resumeState(ctx context.Context, env task.Env, ck *task.Checkpointer, every int64, st *state) (int64, bool, error) {
	step, resumed, err := ck.Resume(ctx, func(r io.Reader) error { return json.NewDecoder(r).Decode(st) })
	if resumed && env.Replacement > 0 {
		// What pruning would have taken by now, unless the checkpoint
		// was pinned for this replacement.
		n, err := completeAfter(ctx, env, ck, step, every)
		if err != nil {
			return 0, false, err
		}
		fmt.Printf("rowcheck rank=%d loaded %s with %d newer complete checkpoints\n", env.Rank, env.ResumeCheckpoint, n)
	}
	if errors.Is(err, task.ErrNoCheckpoint) && env.ResumeCheckpoint != "" {
		// An elastic job that grew: this rank is new, its counts start empty.
		step, resumed, err = env.ResumeStep, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	if resumed && env.Rank == 0 {
		if err := takeOverGone(ctx, env, st); err != nil {
			return 0, false, err
		}
	}
	return step, resumed, nil
}

// completeAfter counts the complete checkpoints of the next 100 due steps
// after step.
func completeAfter(ctx context.Context, env task.Env, ck *task.Checkpointer, step, every int64) (int, error) {
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	fsy, dir, err := res.Resolve(ctx, env.CheckpointDir)
	if err != nil {
		return 0, err
	}
	n := 0
	for s := step + every; s <= step+100*every; s += every {
		ok, err := resume.Complete(ctx, fsy, dir, ck.Name(s))
		if err != nil {
			return 0, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// takeOverGone adds to st the counts of the ranks an elastic job that
// shrank has lost, which rank 0 carries on (a model would be the same on
// every rank): each gone rank's state in the checkpoint resumed from.
func takeOverGone(ctx context.Context, env task.Env, st *state) error {
	for r := env.WorldSize; ; r++ {
		var gone state
		err := env.LoadCheckpoint(ctx, fmt.Sprintf("%s.rank-%d", env.ResumeCheckpoint, r), func(rd io.Reader) error {
			return json.NewDecoder(rd).Decode(&gone)
		})
		if errors.Is(err, task.ErrNoCheckpoint) {
			break
		}
		if err != nil {
			return err
		}
		for e, n := range gone.Rows {
			st.Rows[e] += n
			st.Hash[e] += gone.Hash[e]
		}
	}
	return nil
}

// readDirect reads a direct-mode feed: each epoch from the one the
// generation starts at, the splits in order cut into batches of the
// spec's size, without the batches the checkpoint resumed from had
// consumed; after each batch it tells the Checkpointer where it stands.
func readDirect(ctx context.Context, env task.Env, take func(epoch int, ids []float64) error) error {
	spec, err := env.Direct()
	if err != nil {
		return err
	}
	if spec.Shuffle {
		return errors.New("the direct reader reads in order: submit without --shuffle")
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	// The ids of the rank's rows, in order: every epoch takes the same.
	var ids []float64
	opts := feed.ReadOptions{Columns: spec.Columns, LabelColumn: spec.LabelColumn, BatchRows: 4096}
	if spec.CSV != nil {
		opts.CSV.Header = spec.CSV.Header
		if spec.CSV.Delimiter != "" {
			opts.CSV.Delimiter = rune(spec.CSV.Delimiter[0])
		}
	}
	for _, s := range spec.Splits {
		r, err := feed.OpenSplit(ctx, res, s, opts)
		if err != nil {
			return err
		}
		for {
			b, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Close()
				return fmt.Errorf("read %s: %w", s.URI, err)
			}
			col := b.Column(int(b.NumCols()) - 1) // the label column is last
			for i := 0; i < col.Len(); i++ {
				v, err := strconv.ParseFloat(col.ValueStr(i), 64)
				if err != nil {
					b.Release()
					r.Close()
					return fmt.Errorf("read %s: row id %q: %w", s.URI, col.ValueStr(i), err)
				}
				ids = append(ids, v)
			}
			b.Release()
		}
		r.Close()
	}
	for e := spec.StartEpoch; e < spec.Epochs; e++ {
		first := int64(0)
		if e == spec.StartEpoch {
			first = spec.StartBatch
		}
		n := (int64(len(ids)) + int64(spec.BatchRows) - 1) / int64(spec.BatchRows)
		for b := first; b < n; b++ {
			lo, hi := b*int64(spec.BatchRows), min(int64(len(ids)), (b+1)*int64(spec.BatchRows))
			env.SetFeedPosition(task.FeedPosition{Epoch: e, Batches: b + 1})
			if b+1 == n {
				env.SetFeedPosition(task.FeedPosition{Epoch: e + 1})
			}
			if err := take(e, ids[lo:hi]); err != nil {
				return err
			}
		}
	}
	return nil
}
