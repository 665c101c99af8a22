package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// Growing in place with input (docs/reliability.md, "Growing back in
// place"): a newcomer of a job with input joins at the end of an epoch,
// where every running worker's feed holds (Control.HoldEpoch). Its
// registration waits there; the driver then plans the bigger world,
// answers each running worker's held end with its share of that plan for
// the later epochs and the bigger membership (which the executor hands
// its process before the epoch ends, so the process grows, task.Env.Grow,
// when it sees the end and before any batch of the next epoch), and hands
// the newcomer a task fed from the next epoch on with its own share. A
// newcomer that cannot join (the last epoch came, planning failed, the
// gang changed meanwhile) is abandoned before anyone heard of it: the
// others go on in the world they had, their epoch ends as it would have.

// growAtEpochEnds makes the newcomers of roster g, in a job with input,
// join at epochs' ends through f and the control server cs; task is a
// worker's task of the generation for a rank. A job with input whose
// feeds do not go on in place (f nil) takes no newcomer.
func (d *Driver) growAtEpochEnds(g *roster, f *inPlaceFeed, cs *controlServer, task func(rank int) (*driverpb.Task, error)) {
	if len(d.cfg.Inputs) == 0 || !g.growWorkers {
		return
	}
	if f == nil {
		g.growWorkers = false // a newcomer could not be fed: the job stays at its size
		return
	}
	g.growAtEpochs = true
	cs.boundaryNewcomer = d.newcomerAtBoundary(g, f, task)
}

// newcomerAtBoundary builds the task of a newcomer that joins the running
// gang g at the next epoch's end, fed through f; task is a worker's task
// of the generation for a rank.
func (d *Driver) newcomerAtBoundary(g *roster, f *inPlaceFeed, task func(rank int) (*driverpb.Task, error)) func(context.Context, *member) (*driverpb.Task, error) {
	return func(ctx context.Context, m *member) (*driverpb.Task, error) {
		t, err := d.joinAtBoundary(ctx, g, f, m, task)
		if err != nil {
			f.gate.Thaw()
			g.abandonNewcomer(m, errors.Is(err, errNoEpochToGrow))
			d.logger.Warn("the newcomer cannot join at an epoch's end; the running ranks go on without it", "executor", m.id, "err", err)
			return nil, err
		}
		return t, nil
	}
}

// joinAtBoundary waits for the next epoch end m may join at, and grows the
// gang there.
func (d *Driver) joinAtBoundary(ctx context.Context, g *roster, f *inPlaceFeed, m *member, task func(rank int) (*driverpb.Task, error)) (*driverpb.Task, error) {
	c := d.cfg
	epoch, err := f.gate.Boundary(ctx)
	if err != nil {
		return nil, fmt.Errorf("newcomer %s: wait for an epoch's end to join at: %w", m.id, err)
	}
	running := g.ranks()
	n := len(running)
	w, err := f.smaller(ctx, n+1)
	if err != nil {
		return nil, fmt.Errorf("newcomer %s: plan the input for %d ranks: %w", m.id, n+1, err)
	}
	t, err := task(n)
	if err != nil {
		return nil, fmt.Errorf("newcomer %s: build its task: %w", m.id, err)
	}
	membership, err := g.grewAtBoundary(m, running)
	if err != nil {
		return nil, fmt.Errorf("newcomer %s: %w", m.id, err)
	}
	next := make(map[string]*driverpb.FeedPlan, n)
	for j, id := range running {
		next[id] = planOf(c, w, j)
	}
	f.gate.Grow(epoch, next, membership, m.id)
	mine := planOf(c, w, n)
	t.Feed.Splits, t.Feed.TargetBatches, t.Feed.EpochRows = mine.GetSplits(), mine.GetTargetBatches(), mine.GetEpochRows()
	t.Feed.StartEpoch, t.Feed.StartBatch = int32(epoch+1), 0
	t.Feed.HasRest, t.Feed.Rest, t.Feed.RestBatches = false, nil, 0
	// Like a worker dealt a new plan, its epochs end at its rows.
	t.Feed.HoldEpochs, t.Feed.HoldForProcess = true, false
	t.Replacement = 1
	d.logger.Info("a newcomer joins at an epoch's end; the running ranks feed the bigger world's plan from the next epoch", "executor", m.id,
		"epoch", epoch, "world_size", n+1)
	return t, nil
}

// awaitBoundary waits, once newcomer m registered, until it joined the
// gang or was abandoned (an error), or ctx ends.
func awaitBoundary(ctx context.Context, m *member) error {
	select {
	case <-m.joined:
		return nil
	case <-m.abandoned:
		return fmt.Errorf("it could not join at an epoch's end")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ranks is the running ranks' executor ids, in rank order.
func (g *roster) ranks() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.order)
}

// grewAtBoundary adds newcomer m to the gang, whose running ranks were
// planned as running, and returns the bigger membership; it fails when
// the gang changed meanwhile or is ending.
func (g *roster) grewAtBoundary(m *member, running []string) (*driverpb.Membership, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || g.finished || g.failure != nil {
		return nil, errStopped
	}
	if g.members[m.id] != m {
		return nil, fmt.Errorf("its executor ended while it waited to join")
	}
	if !slices.Equal(g.order, running) || g.shrinking != nil || g.replacing != nil {
		return nil, fmt.Errorf("the running ranks changed while it waited to join")
	}
	g.grewLocked(m)
	g.replanned = true
	return g.membership, nil
}

// abandonNewcomer gives up on registered newcomer m, which will not join:
// the running ranks never heard of it. last says the job is in its last
// epoch: no other newcomer is started for nothing.
func (g *roster) abandonNewcomer(m *member, last bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.abandonWaitingLocked(m)
	if last {
		g.growWorkers = false
	}
}

// abandonWaitingLocked abandons m if it is a newcomer waiting for an
// epoch's end to join at, and says whether it was; g.mu is held.
func (g *roster) abandonWaitingLocked(m *member) bool {
	if m.abandoned == nil || g.members[m.id] != m || slices.Contains(g.order, m.id) {
		return false
	}
	delete(g.members, m.id)
	if g.growing == m {
		g.growing = nil
	}
	close(m.abandoned)
	g.checkAllExitedLocked()
	return true
}
