package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/task/resume"
)

// PolicyElastic runs a job with between MinExecutors and NumExecutors
// workers: it starts with as many as the cluster gives, and after a
// failure goes on with the survivors (down to MinExecutors) instead of
// failing, each new world resuming from the newest complete checkpoint
// with the rest of its epoch dealt among the new ranks.
const PolicyElastic = "elastic"

// errGrow stops an elastic generation that has room to grow at its newest
// complete checkpoint.
var errGrow = errors.New("the cluster has room for more executors")

// dealt is how one generation of an elastic job dealt its feed: its world,
// and the epoch it dealt as segments of an earlier world's epochs, if any.
type dealt struct {
	w         *world
	restEpoch int // -1: none
	rest      [][]feed.Segment
}

// elastic runs an elastic job's generations. Each one asks for as many
// executors as it may have (NumExecutors at first, the survivors after a
// failure), waiting spindle.failure.elasticWait for room before it asks
// for one fewer, down to MinExecutors.
func (d *Driver) elastic(ctx context.Context, build func(context.Context, int) (*world, error),
	served map[string]string, start time.Time) error {
	c := d.cfg
	rc := restartCounts{hostFailures: map[string]int{}, first: d.firstGeneration()}
	deals := map[int]*dealt{}
	most := c.NumExecutors
	for gen := rc.first; ; gen++ {
		var (
			launched bool
			err      error
			n        int
		)
		for n = most; ; n-- {
			w, berr := build(ctx, n)
			if berr != nil {
				return berr
			}
			from, dl, serr := d.elasticStart(ctx, w, deals)
			if serr != nil {
				return serr
			}
			deals[gen] = dl
			timeout := c.RegistrationTimeout
			if n > c.MinExecutors {
				timeout = min(timeout, c.ElasticWait)
			}
			if n < c.NumExecutors {
				d.logger.Info("elastic job running smaller", "executors", n, "of", c.NumExecutors, "generation", gen)
				if c.Console != nil {
					c.Console.Eprintln(fmt.Sprintf("job %s: generation %d runs %d of %d executors (spindle.failure.policy elastic)", c.JobID, gen, n, c.NumExecutors))
				}
			}
			grow := d.growCheck(gen, w, from, rc.excluded)
			d.grow, d.elasticFeed = grow.check, &elasticFeed{dl: dl, build: build}
			if c.growsInPlace(w.slots) {
				d.grow, d.growRoom = nil, grow.room
			}
			launched, err = d.generation(ctx, gen, w, served, start, &rc, from, timeout)
			d.grow, d.growRoom, d.elasticFeed = nil, nil, nil
			if errors.Is(err, errGrow) {
				break
			}
			if launched || err == nil || ctx.Err() != nil || n <= c.MinExecutors || !restartable(err) {
				break
			}
			d.logger.Info("no room for the elastic job's executors; asking for fewer", "executors", n, "err", err)
			gen++ // the next attempt's executors get ids of their own
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, errGrow) {
			most = c.NumExecutors
			d.logger.Info("elastic job growing at its newest checkpoint", "executors", n, "up to", most)
			if c.Console != nil {
				c.Console.Eprintln(fmt.Sprintf("job %s: the cluster has room for more executors; growing from %d toward %d at the newest checkpoint",
					c.JobID, n, most))
			}
			continue
		}
		if err := d.afterFailure(ctx, gen, err, launched, &rc); err != nil {
			return err
		}
		// The survivors go on; a lost rank is not waited for, nor those
		// the generation already went on without in place.
		most = max(c.MinExecutors, n-1-int(d.shrunk.Load())+int(d.grown.Load()))
	}
}

// grower decides, while an elastic generation smaller than NumExecutors
// runs, whether to stop it and grow: when the cluster has room for
// another executor and every rank has finished a checkpoint since the
// generation started, so that growing costs little more than the restart.
type grower struct {
	d       *Driver
	gen     int
	n       int
	from    string
	spec    ExecutorSpec
	checked time.Time
}

func (d *Driver) growCheck(gen int, w *world, from *genStart, excluded []string) *grower {
	g := &grower{d: d, gen: gen, n: w.n, checked: time.Now()}
	if from != nil {
		g.from = from.checkpoint
	}
	s := w.slots[0].spec
	g.spec = ExecutorSpec{Role: RoleWorker, Cores: s.Cores, MemoryMB: s.MemoryMB, GPUs: s.GPUs,
		SharedMemoryMB: d.cfg.SharedFeedMB(RoleWorker), ExcludedHosts: excluded}
	return g
}

// check is called on the driver's ticks; it looks every
// spindle.failure.elasticWait.
func (g *grower) check(ctx context.Context) bool {
	d := g.d
	c := d.cfg
	rr, ok := d.cm.(RoomReporter)
	if _, local := d.cm.(*Local); local {
		// local[N] grows only in place: its room is a lost executor's
		// slot, which a restart at a checkpoint gives back anyway.
		ok = false
	}
	if !ok || g.n >= c.NumExecutors || d.resumer == nil || time.Since(g.checked) < c.ElasticWait {
		return false
	}
	g.checked = time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.ElasticWait)
	defer cancel()
	room, err := rr.Room(ctx, g.spec)
	if err != nil || room < 1 {
		return false
	}
	fsy, dir, err := d.res.Resolve(ctx, d.resumer.dir)
	if err != nil {
		return false
	}
	p, _, err := resume.Latest(ctx, fsy, dir, 0, nil, d.resumer.since)
	return err == nil && p != nil && p.Generation == g.gen && p.Checkpoint != g.from
}

// room says, every spindle.failure.elasticWait, whether the cluster has
// room for a newcomer to join a running gang of n ranks in place
// (growinplace.go): no checkpoint is needed, as no rank restarts.
func (g *grower) room(ctx context.Context, n int) bool {
	d := g.d
	c := d.cfg
	rr, ok := d.cm.(RoomReporter)
	if !ok || n >= c.NumExecutors || time.Since(g.checked) < c.ElasticWait {
		return false
	}
	g.checked = time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.ElasticWait)
	defer cancel()
	room, err := rr.Room(ctx, g.spec)
	return err == nil && room >= 1
}

// elasticStart is where a generation of world w starts: from the newest
// complete checkpoint of this job, whatever world recorded it, with the
// rest of that checkpoint's epoch dealt among w's ranks as segments of
// the recording world's epochs (so that no row is fed twice or skipped),
// and later epochs dealt by w's own plan.
func (d *Driver) elasticStart(ctx context.Context, w *world, deals map[int]*dealt) (*genStart, *dealt, error) {
	c := d.cfg
	dl := &dealt{w: w, restEpoch: -1}
	if d.resumer == nil {
		return nil, dl, nil
	}
	fsy, dir, err := d.res.Resolve(ctx, d.resumer.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("find the checkpoint to resume from in %s: %w", d.resumer.dir, err)
	}
	p, skipped, err := resume.Latest(ctx, fsy, dir, 0, nil, d.resumer.since)
	if err != nil {
		return nil, nil, fmt.Errorf("find the checkpoint to resume from: %w", err)
	}
	for _, s := range skipped {
		d.logger.Info("checkpoint not resumed from", "why", s)
	}
	if p == nil {
		return nil, dl, nil
	}
	old := deals[p.Generation]
	if old == nil || old.w.n != p.World {
		d.logger.Warn("checkpoint recorded by a generation this driver did not run; starting afresh", "checkpoint", p.Checkpoint, "generation", p.Generation)
		return nil, dl, nil
	}
	from := &genStart{checkpoint: p.Checkpoint, step: p.Step, feed: make([]*rankStart, w.n)}
	epoch := -1
	for r, pos := range p.Feed {
		switch {
		case pos == nil && len(c.Inputs) > 0:
			return nil, nil, fmt.Errorf("checkpoint %s: rank %d recorded no feed position", p.Checkpoint, r)
		case pos == nil:
		case epoch < 0:
			epoch = pos.Epoch
		case pos.Epoch != epoch:
			return nil, nil, fmt.Errorf("checkpoint %s: ranks recorded different epochs (%d and %d); an elastic job's ranks must keep in step (even batches)",
				p.Checkpoint, epoch, pos.Epoch)
		}
	}
	if epoch < 0 || epoch >= c.Epochs {
		for r := range from.feed {
			from.feed[r] = &rankStart{epoch: max(epoch, 0)}
		}
		d.announceResume(p, w.n, 0)
		return from, dl, nil
	}
	// The rest of the epoch: each old rank's stream from where it stood.
	var rest []feed.Segment
	for r := 0; r < old.w.n; r++ {
		rest = append(rest, d.rankRest(old, r, epoch, p.Feed[r].Batches)...)
	}
	var total int64
	for _, s := range rest {
		total += s.Rows()
	}
	if total == 0 {
		for r := range from.feed {
			from.feed[r] = &rankStart{epoch: epoch + 1}
		}
		d.announceResume(p, w.n, 0)
		return from, dl, nil
	}
	// Dealt in whole batches, the odd rows to the first ranks; every rank
	// pads to the same batch count unless even batches are off.
	parts, pad := dealRest(rest, w.n, c.BatchRows, c.EvenBatches)
	dl.restEpoch, dl.rest = epoch, parts
	for j := range w.n {
		from.feed[j] = &rankStart{epoch: epoch, hasRest: true, rest: parts[j], restBatches: pad}
	}
	d.announceResume(p, w.n, total)
	return from, dl, nil
}

// announceResume says where an elastic generation starts.
func (d *Driver) announceResume(p *resume.Point, n int, restRows int64) {
	d.logger.Info("resuming from checkpoint", "checkpoint", p.Checkpoint, "step", p.Step, "recorded_by_ranks", p.World, "ranks", n, "rest_rows", restRows)
	if c := d.cfg.Console; c != nil {
		msg := fmt.Sprintf("resuming from checkpoint %s (step %d, taken by %d ranks) with %d ranks", p.Checkpoint, p.Step, p.World, n)
		if restRows > 0 {
			msg += fmt.Sprintf("; the %d rows left in the epoch are dealt among them", restRows)
		}
		c.Eprintln(msg)
	}
}

// baseSegment is the whole of rank r's epoch in world w.
func (d *Driver) baseSegment(w *world, r int) feed.Segment {
	c := d.cfg
	rows := w.plan.RowsPerRank[r]
	epochRows := feed.EvenRows(w.plan.RowsPerRank, r, c.BatchRows, c.EvenBatches)
	limit := feed.EpochRowLimit(rows, c.BatchRows, c.EvenBatches, w.target, epochRows)
	if limit < 0 {
		limit = rows
	}
	return feed.Segment{Splits: w.plan.Ranks[r], Rank: r, TargetBatches: w.target, EpochRows: epochRows, RowEnd: limit}
}

// sliceSegments drops the first skip rows of the stream segs make.
func sliceSegments(segs []feed.Segment, skip int64) []feed.Segment {
	var out []feed.Segment
	for _, s := range segs {
		if skip >= s.Rows() {
			skip -= s.Rows()
			continue
		}
		s.RowStart += skip
		skip = 0
		out = append(out, s)
	}
	return out
}

// takeSegments returns rows [from, to) of the stream segs make.
func takeSegments(segs []feed.Segment, from, to int64) []feed.Segment {
	var out []feed.Segment
	var at int64
	for _, s := range segs {
		lo, hi := at, at+s.Rows()
		at = hi
		if hi <= from || lo >= to {
			continue
		}
		t := s
		t.RowStart += max(from, lo) - lo
		t.RowEnd -= hi - min(to, hi)
		out = append(out, t)
	}
	return out
}
