package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
)

// Going on in place with input (docs/reliability.md, "Going on in
// place"): the survivors' feeds hold every epoch's end (hold_epochs) and
// ask the epoch gate whether it ends. When a worker is left behind, the
// gate ends no epoch until its rest is dealt; the survivors re-form their
// world, agree on the batches of the epoch the world completed, and one
// of them reports them (task.Env.ReportWorldBatches, in its heartbeat).
// The rows of the lost rank's epoch from that batch on are then dealt
// among the survivors as the gang restart deals a rest (dealRest), each
// with its share of the smaller world's plan for the later epochs.

// elasticFeed is how the running elastic generation dealt its feed, and
// how a smaller world is planned.
type elasticFeed struct {
	dl    *dealt
	build func(ctx context.Context, n int) (*world, error)
}

// inPlaceFeedFor wires going on in place with input into the roster g of
// an elastic generation that shrinks in place, its gate open until stop
// is closed; nil for a job without input. Its feeds must hold their
// epochs' ends (FeedTask.hold_epochs).
func (d *Driver) inPlaceFeedFor(ctx context.Context, g *roster, stop <-chan struct{}) *inPlaceFeed {
	ef := d.elasticFeed
	if len(d.cfg.Inputs) == 0 || ef == nil {
		return nil
	}
	f := &inPlaceFeed{cfg: d.cfg, ctx: ctx, gate: newEpochGate(d.cfg.Epochs, slices.Clone(g.order), stop),
		rest: func(rank, epoch int, batches int64) []feed.Segment {
			return d.rankRest(ef.dl, rank, epoch, batches)
		},
		smaller: ef.build, fail: g.fail, logger: d.logger,
		say: func(msg string) {
			if c := d.cfg.Console; c != nil {
				c.Eprintln(fmt.Sprintf("job %s: %s", d.cfg.JobID, msg))
			}
		}}
	g.shrinkOnce, g.onLeftBehind, g.onExitedWell = true, f.left, f.gate.Left
	return f
}

// errEpochOver refuses a rest that no running feed can serve in its own
// epoch: the survivors' feeds ended that epoch and opened the next on the
// old plan before the loss was known.
var errEpochOver = errors.New("driver: the survivors' feeds had already ended the epoch the lost rank was in")

// inPlaceFeed deals the rest of a lost worker's epoch to a running
// generation's survivors.
type inPlaceFeed struct {
	cfg  Config
	ctx  context.Context // the generation's: deals plan under it
	gate *epochGate
	// rest is the rest of an old rank's epoch from a batch on, in the
	// generation's world (rankRest on its deal).
	rest func(rank, epoch int, batches int64) []feed.Segment
	// smaller plans the world of n survivors for the later epochs.
	smaller func(ctx context.Context, n int) (*world, error)
	// fail fails the generation, so that the gang restarts smaller at
	// its checkpoint, when the rest cannot be dealt.
	fail func(error)
	// say tells the console what was dealt; logger logs it.
	say    func(msg string)
	logger *slog.Logger

	mu      sync.Mutex
	waiting *leftBehind // the lost worker whose rest waits for the report
	dealing sync.WaitGroup
}

// leftBehind is a worker the gang went on without, until its rest is
// dealt.
type leftBehind struct {
	id        string
	rank      int      // its rank in the generation's world
	version   int64    // the membership that left it behind
	survivors []string // executor ids, in their new rank order
	loss      error
}

// left hears that the gang went on without worker id (rank, lost with
// loss) in membership version, survivors remaining. The gate ends no
// epoch until the survivors report how far their world was.
func (f *inPlaceFeed) left(id string, rank int, version int64, survivors []string, loss error) {
	f.gate.Lost(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waiting = &leftBehind{id: id, rank: rank, version: version, survivors: survivors, loss: loss}
}

// reported takes a survivor's report of how far its world was; the first
// for the awaited membership deals the lost worker's rest (in its own
// goroutine: planning the smaller world reads the inputs).
func (f *inPlaceFeed) reported(w *driverpb.WorldBatches) {
	f.mu.Lock()
	lb := f.waiting
	if lb == nil || w.GetMembershipVersion() != lb.version {
		f.mu.Unlock()
		return
	}
	f.waiting = nil
	f.dealing.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.dealing.Done()
		if err := f.deal(f.ctx, lb, int(w.GetEpoch()), w.GetBatches()); err != nil {
			f.fail(lossNoted(lb.loss, fmt.Sprintf("; its rest of the epoch could not be dealt to the ranks that went on (%v), so the gang restarts smaller", err)))
		}
	}()
}

// wait waits for the deals under way.
func (f *inPlaceFeed) wait() { f.dealing.Wait() }

// deal deals lb's rows of epoch from batch batches on among the survivors.
func (f *inPlaceFeed) deal(ctx context.Context, lb *leftBehind, epoch int, batches int64) error {
	c := f.cfg
	at, rest, err := f.restFrom(lb, epoch, batches)
	if err != nil {
		return err
	}
	if at != epoch {
		batches = 0 // the next epoch, whole
	}
	n := len(lb.survivors)
	parts, pad := dealRest(rest, n, c.BatchRows, c.EvenBatches)
	var next *world
	if at+1 < c.Epochs {
		if next, err = f.smaller(ctx, n); err != nil {
			return fmt.Errorf("plan the input for %d ranks: %w", n, err)
		}
	}
	deal := make(map[string]continuation, n)
	for j, id := range lb.survivors {
		deal[id] = continuation{segs: parts[j], pad: pad, next: planOf(c, next, j)}
	}
	if err := f.gate.Deal(at, deal); err != nil {
		return err
	}
	f.logger.Info("a lost rank's rest of the epoch dealt among the ranks that went on", "rank", lb.rank, "epoch", at,
		"from_batch", batches, "rows", segmentRows(rest), "ranks", n, "pad_batches", pad)
	f.say(fmt.Sprintf("the %d rows rank %d had left of epoch %d (from batch %d) are dealt among the %d ranks that went on", segmentRows(rest), lb.rank, at, batches, n))
	return nil
}

// restFrom is the epoch lb's rest is served in and the rest: its rows of
// epoch from batch batches on. When the survivors' feeds ended that epoch
// before the loss (the rank died training the batches read ahead), the
// rest is served in the next epoch only if nothing of epoch was left: its
// rows would be read in another epoch's order.
func (f *inPlaceFeed) restFrom(lb *leftBehind, epoch int, batches int64) (int, []feed.Segment, error) {
	open := f.gate.open()
	rest := f.rest(lb.rank, epoch, batches)
	switch {
	case epoch > open:
		return 0, nil, fmt.Errorf("the survivors reported epoch %d while the feeds are in epoch %d", epoch, open)
	case epoch == open:
		return epoch, rest, nil
	case epoch+1 == open && segmentRows(rest) == 0:
		return open, f.rest(lb.rank, open, 0), nil
	}
	return 0, nil, fmt.Errorf("%w (epoch %d, batch %d)", errEpochOver, epoch, batches)
}

// sameBatches says whether plan gives every rank the same number of
// batches an epoch (even batches on, or rows that split so). Only then may
// a feed hold its epoch's end until its process asked beyond the last
// batch (FeedTask.hold_for_process): a process with fewer batches that
// waited there would keep the others from their last steps, which
// allreduce with it.
func sameBatches(plan *feed.JobPlan, batchRows int, even feed.EvenMode) bool {
	if plan == nil || len(plan.RowsPerRank) == 0 {
		return false
	}
	if even != feed.EvenOff {
		return true
	}
	b := int64(max(batchRows, 1))
	first := (plan.RowsPerRank[0] + b - 1) / b
	if first == 0 {
		return false // rows not known yet (a flight's endpoints), or none
	}
	for _, r := range plan.RowsPerRank[1:] {
		if (r+b-1)/b != first {
			return false
		}
	}
	return true
}

// planOf is rank j's share of world w's plan, or nil without w.
func planOf(c Config, w *world, j int) *driverpb.FeedPlan {
	if w == nil {
		return nil
	}
	return &driverpb.FeedPlan{Splits: driverpb.SplitsFromFeed(w.plan.Ranks[j]), Rank: int32(j), TargetBatches: w.target,
		EpochRows: feed.EvenRows(w.plan.RowsPerRank, j, c.BatchRows, c.EvenBatches)}
}

// segmentRows counts the rows of segs.
func segmentRows(segs []feed.Segment) int64 {
	var n int64
	for _, s := range segs {
		n += s.Rows()
	}
	return n
}

// lossNoted is loss with note after its first line (before the lost
// process's stderr), so that the console's reason carries it.
func lossNoted(loss error, note string) error {
	var le *lossError
	if !errors.As(loss, &le) {
		return fmt.Errorf("%w%s", loss, note)
	}
	c := *le
	first, tail, _ := strings.Cut(c.msg, "; last lines of its stderr:")
	c.msg = first + note
	if tail != "" {
		c.msg += "; last lines of its stderr:" + tail
	}
	return &c
}
