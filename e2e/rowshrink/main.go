// Command rowshrink is a training process for the tests of going on in
// place with input: a Go trainer that reads a tensor feed whose label
// column holds row ids and allreduces, every step, what its batch adds
// to the world's row checksums (rows and rowsum.Hash of the ids, per
// epoch). A step counts only when its allreduce completed, so the sums
// are the rows the world trained. When a rank is lost and the job goes on
// without it in place, it re-forms the smaller world (task.Env.Rejoin),
// takes the furthest survivor's sums (task.CatchUp) and reports how far
// the world was in its epoch (task.Env.ReportWorldBatches), so that the
// driver deals the lost rank's rest to the survivors' feeds. A survivor
// waiting for its feed when that happens (at an epoch's end, which the
// driver holds until the rest is dealt) notices the new membership and
// joins the smaller world too.
//
// It prints "rowshrink started pid=123 rank=2 world=4 generation=0" once
// its communicator formed, when it goes on in a smaller world
//
//	rowshrink went on pid=123 rank=1 world=3 was=2/4 epoch=1 batches=21 at_ms=1764412345678
//
// on the last world's rank 0, the world's rows per epoch as rowcheck
// prints its own, for rowsum.Check over one rank:
//
//	rowcheck rank=0 generation=0 epoch=0 rows=2400 hash=9f2c0e2a9b3d4411
//
// and, on every rank at its end, "rowshrink final pid=123 rank=1 world=3
// steps=180". With --grow every rank calls task.Env.Grow at each epoch's
// end, before the next epoch's first batch: when the driver took a
// newcomer at that end, the executor handed the bigger membership to the
// process before the end reached it, so every rank grows there and
// prints "rowshrink grew pid=123 rank=1 world=4 epoch=2 step=120"; the
// newcomer takes the others' sums (task.CatchUp) and prints "rowshrink
// newcomer pid=124 rank=3 world=4 step=120". A rank whose feed ended joins the world's steps with no
// rows until every rank's did, so that uneven batches
// (spindle.feed.evenBatches=off) end together.
//
// --crash-epoch and --crash-batch make the process of rank --crash-rank
// SIGKILL itself (in generation 0) when it has read that batch of that
// epoch and before it trains it; with --crash-read-ahead it first reads
// the rest of that epoch, as a process that reads ahead of its training
// does, up to the epoch's end or for at most 2 s (a feed that ends the
// epoch only once every rank trained it holds the end).
//
// The feed is read when the training loop asks for a batch, not ahead of
// it: a process that has asked beyond its epoch's last batch has trained
// all of it, which is what the feed's held end waits for.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/task"
)

// limbs is how many 16-bit parts a row hash is summed in: float64 sums of
// them stay exact for up to 2^36 rows.
const limbs = 4

// width is the values an epoch has in the sums: rows, then the limbs.
const width = 1 + limbs

func main() {
	crashRank := flag.Int("crash-rank", 1, "the rank whose process kills itself")
	crashEpoch := flag.Int("crash-epoch", -1, "the epoch in which it does (-1: never)")
	crashBatch := flag.Int64("crash-batch", 0, "the batch of that epoch it reads and does not train")
	readAhead := flag.Bool("crash-read-ahead", false, "read the rest of the crash epoch before the crash")
	pause := flag.Duration("pause", 0, "the work of one step")
	epochs := flag.Int("epochs", 1, "the job's epochs (--epochs of the submit)")
	grow := flag.Bool("grow", false, "grow in place at the epochs' ends (task.Env.Grow)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := newTrainer(ctx, *epochs, *grow)
	if err == nil {
		t.crashRank, t.crashEpoch, t.crashBatch, t.readAhead, t.pause = *crashRank, *crashEpoch, *crashBatch, *readAhead, *pause
		err = t.run(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rowshrink: %v\n", err)
		os.Exit(1)
	}
}

// item is what the feed reader hands the training loop: a batch of ids of
// epoch, an epoch's end, or the feed's end.
type item struct {
	epoch int
	ids   []int32
	end   bool
	done  bool
	err   error
}

type trainer struct {
	env  task.Env
	comm *collective.Comm
	// sums are the world's rows and hash limbs per epoch: the same on
	// every rank.
	sums []float64
	// step counts the steps the world completed; epochStart is the step
	// at which the current epoch began, epoch the epoch of the last batch
	// read.
	step, epochStart int64
	epoch            int
	version          int64 // the membership the communicator follows

	crashRank, crashEpoch int
	crashBatch            int64
	readAhead             bool
	pause                 time.Duration
	grow                  bool

	// want asks the feed reader for the next item, which comes on items;
	// asking: it was asked and the item has not come yet.
	want   chan struct{}
	items  chan item
	asking bool
}

// ask asks the feed reader for the next item unless it was asked already.
func (t *trainer) ask() {
	if !t.asking {
		t.want <- struct{}{} // the last ask was answered: room in want
		t.asking = true
	}
}

func newTrainer(ctx context.Context, epochs int, grow bool) (*trainer, error) {
	env, err := task.FromEnv()
	if err != nil {
		return nil, err
	}
	comm, err := env.Comm(ctx)
	if err != nil {
		return nil, err
	}
	t := &trainer{env: env, comm: comm, sums: make([]float64, width*epochs), grow: grow}
	if m, err := env.Membership(); err == nil {
		t.version = m.Version
	}
	fmt.Printf("rowshrink started pid=%d rank=%d world=%d generation=%d\n", os.Getpid(), comm.Rank(), comm.WorldSize(), env.Generation)
	if grow && env.Replacement > 0 {
		// A newcomer joins at the others' epoch end: its CatchUp answers
		// theirs after they grew.
		if t.step, err = task.CatchUp(ctx, comm, -1, t.sums); err != nil {
			comm.Close()
			return nil, fmt.Errorf("newcomer: %w", err)
		}
		t.epochStart = t.step
		fmt.Printf("rowshrink newcomer pid=%d rank=%d world=%d step=%d\n", os.Getpid(), comm.Rank(), comm.WorldSize(), t.step)
	}
	return t, nil
}

func (t *trainer) run(ctx context.Context) error {
	defer func() { t.comm.Close() }()
	ctx, cancel := context.WithCancel(ctx)
	t.want, t.items = make(chan struct{}, 1), make(chan item)
	read := make(chan struct{})
	go func() {
		defer close(read)
		t.readFeed(ctx)
	}()
	defer func() {
		cancel()
		<-read
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var it item
		t.ask()
		select {
		case it = <-t.items:
			t.asking = false
		case <-tick.C:
			if err := t.followShrink(ctx); err != nil {
				return err
			}
			continue
		}
		switch {
		case it.err != nil:
			return it.err
		case it.done:
			return t.drain(ctx)
		case it.end:
			if err := t.growAt(ctx, it.epoch); err != nil {
				return err
			}
			continue
		}
		if it.epoch != t.epoch {
			t.epoch, t.epochStart = it.epoch, t.step
		}
		if _, err := t.train(ctx, it); err != nil {
			return err
		}
	}
}

// drain joins the world's steps with no rows once this rank's feed
// ended, until no rank has a batch left: with even batches off
// (spindle.feed.evenBatches=off) the ranks a lost rank's rest was dealt
// to end that epoch, and so the job, a step or more after the others.
func (t *trainer) drain(ctx context.Context) error {
	for {
		busy, err := t.train(ctx, item{epoch: t.epoch})
		if err != nil {
			return err
		}
		if busy == 0 {
			break
		}
	}
	t.printSums()
	fmt.Printf("rowshrink final pid=%d rank=%d world=%d steps=%d\n", os.Getpid(), t.comm.Rank(), t.comm.WorldSize(), t.step)
	return nil
}

// train trains one batch (none when it holds no ids): it allreduces the
// batch's sums, and whether it had rows, until a step completes with it,
// or the world shows it was trained before it failed. busy is how many
// ranks had a batch in the step (at least one when that is not known).
func (t *trainer) train(ctx context.Context, it item) (busy int, err error) {
	if len(it.ids) > 0 && t.env.Generation == 0 && t.comm.Rank() == t.crashRank && t.version == 0 &&
		it.epoch == t.crashEpoch && t.step-t.epochStart == t.crashBatch {
		if t.readAhead {
			t.readRest(ctx)
		}
		return 0, syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	for {
		if t.pause > 0 {
			time.Sleep(t.pause) // the step's work: not synchronisation
		}
		add := make([]float64, len(t.sums)+1)
		if len(it.ids) > 0 {
			add[len(t.sums)] = 1
		}
		at := width * it.epoch
		for _, id := range it.ids {
			add[at]++
			h := rowsum.Hash(uint64(id))
			for l := range limbs {
				add[at+1+l] += float64(h >> (16 * l) & 0xffff)
			}
		}
		err := collective.AllReduce(ctx, t.comm, add, collective.Sum)
		if err == nil {
			for i := range t.sums {
				t.sums[i] += add[i]
			}
			t.step++
			return int(add[len(t.sums)]), nil
		}
		before := t.step
		if err := t.goOn(ctx, err); err != nil {
			return 0, err
		}
		if t.step > before {
			return 1, nil // the world trained this batch before it failed
		}
	}
}

// followShrink joins the smaller world when the job went on without a
// rank while this process waited for its feed.
// growAt grows the world in place at the end of epoch, with --grow, when
// a newcomer joins there.
func (t *trainer) growAt(ctx context.Context, epoch int) error {
	if !t.grow {
		return nil
	}
	comm, grew, err := t.env.Grow(ctx, t.comm)
	if err != nil {
		return fmt.Errorf("grow at the end of epoch %d: %w", epoch, err)
	}
	if !grew {
		return nil
	}
	t.comm = comm
	if t.step, err = task.CatchUp(ctx, comm, t.step, t.sums); err != nil {
		return fmt.Errorf("step %d: %w", t.step, err)
	}
	if m, err := t.env.Membership(); err == nil {
		t.version = m.Version
	}
	fmt.Printf("rowshrink grew pid=%d rank=%d world=%d epoch=%d step=%d\n", os.Getpid(), comm.Rank(), comm.WorldSize(), epoch+1, t.step)
	return nil
}

func (t *trainer) followShrink(ctx context.Context) error {
	m, err := t.env.Membership()
	if err != nil || m.Version <= t.version || len(m.Left) == 0 {
		return nil
	}
	lost := &collective.PeerError{Rank: m.Left[0], Err: collective.ErrPeerLost}
	return t.goOn(ctx, fmt.Errorf("the job went on without rank %d while this rank waited for its feed: %w", m.Left[0], lost))
}

// goOn recovers from err, which lost a rank: it forms the smaller world,
// takes the furthest rank's sums and reports how far the world was.
func (t *trainer) goOn(ctx context.Context, err error) error {
	was := fmt.Sprintf("%d/%d", t.comm.Rank(), t.comm.WorldSize())
	comm, err := t.env.Rejoin(ctx, t.comm, err)
	if err != nil {
		return fmt.Errorf("step %d: %w", t.step, err)
	}
	t.comm = comm
	if t.step, err = task.CatchUp(ctx, comm, t.step, t.sums); err != nil {
		return fmt.Errorf("step %d: %w", t.step, err)
	}
	m, err := t.env.Membership()
	if err != nil {
		return err
	}
	t.version = m.Version
	batches := t.step - t.epochStart
	if err := t.env.ReportWorldBatches(ctx, t.epoch, batches); err != nil {
		return err
	}
	fmt.Printf("rowshrink went on pid=%d rank=%d world=%d was=%s epoch=%d batches=%d at_ms=%d\n",
		os.Getpid(), comm.Rank(), comm.WorldSize(), was, t.epoch, batches, time.Now().UnixMilli())
	return nil
}

// readRest reads the rest of the epoch without training it, up to its
// end or for at most 2 s.
func (t *trainer) readRest(ctx context.Context) {
	limit := time.NewTimer(2 * time.Second)
	defer limit.Stop()
	for {
		t.ask()
		select {
		case it := <-t.items:
			t.asking = false
			if it.end || it.done || it.err != nil {
				return
			}
		case <-limit.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// readFeed hands the training loop the feed's batches, epoch ends and
// end, reading each only when the loop asks for it (want).
func (t *trainer) readFeed(ctx context.Context) {
	asked := func() bool {
		select {
		case <-t.want:
			return true
		case <-ctx.Done():
			return false
		}
	}
	send := func(it item) bool {
		select {
		case t.items <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for asked() {
		ep, err := t.env.Tensors(ctx)
		if err != nil {
			send(item{err: err})
			return
		}
		if ep.Epoch() < 0 {
			ep.Close()
			send(item{done: true})
			return
		}
		for first := true; ; first = false {
			if !first && !asked() {
				ep.Close()
				return
			}
			b, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil && b.Labels == nil {
				err = errors.New("the feed has no label column (submit with --label-column id)")
			}
			if err != nil {
				ep.Close()
				send(item{err: fmt.Errorf("epoch %d: %w", ep.Epoch(), err)})
				return
			}
			ids := make([]int32, len(b.Labels))
			for i, id := range b.Labels {
				ids[i] = int32(id)
			}
			if !send(item{epoch: ep.Epoch(), ids: ids}) {
				ep.Close()
				return
			}
		}
		ep.Close()
		if !send(item{epoch: ep.Epoch(), end: true}) {
			return
		}
	}
}

// printSums prints, on rank 0, the rows the world trained per epoch.
func (t *trainer) printSums() {
	if t.comm.Rank() != 0 {
		return
	}
	for e := range len(t.sums) / width {
		at := width * e
		var h uint64
		for l := range limbs {
			h += uint64(t.sums[at+1+l]) << (16 * l)
		}
		fmt.Printf("rowcheck rank=0 generation=%d epoch=%d rows=%d hash=%016x\n", t.env.Generation, e, int64(t.sums[at]), h)
	}
}
