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
// the first generation after that many batches.
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
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/task"
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
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *crashRank, *crashAfter, *every, *pause); err != nil {
		fmt.Fprintf(os.Stderr, "rowcheck: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, crashRank, crashAfter int, every int64, pause time.Duration) error {
	env, err := task.FromEnv()
	if err != nil {
		return err
	}
	ck, err := env.Checkpointer(task.CheckpointOptions{Prefix: "rows", EverySteps: every, PerRank: true})
	if err != nil {
		return err
	}
	st := state{Rows: map[int]int64{}, Hash: map[int]uint64{}}
	step, resumed, err := ck.Resume(ctx, func(r io.Reader) error { return json.NewDecoder(r).Decode(&st) })
	if errors.Is(err, task.ErrNoCheckpoint) && env.ResumeCheckpoint != "" {
		// An elastic job that grew: this rank is new, its counts start empty.
		step, resumed, err = env.ResumeStep, true, nil
	}
	if err != nil {
		return err
	}
	if resumed && env.Rank == 0 {
		// An elastic job that shrank: rank 0 carries on the counts of the
		// ranks that are gone (a model would be the same on every rank).
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
	}
	if resumed {
		fmt.Printf("rowcheck rank=%d resumed from %s step %d, feed at epoch %d batch %d\n",
			env.Rank, env.ResumeCheckpoint, step, env.FeedStartEpoch, env.FeedStartBatch)
	}
	taken := 0
	save := func(w io.Writer) error { return json.NewEncoder(w).Encode(st) }
	for {
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
			for _, id := range b.Labels {
				st.Rows[ep.Epoch()]++
				st.Hash[ep.Epoch()] += rowsum.Hash(uint64(id))
			}
			if pause > 0 {
				time.Sleep(pause) // stands for the work of a training step
			}
			step++
			taken++
			if env.Generation == 0 && env.Rank == crashRank && crashAfter > 0 && taken == crashAfter {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			if _, err := ck.MaybeSave(ctx, step, save); err != nil {
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
