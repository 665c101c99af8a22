package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
)

// Growing in place (spindle.failure.growInPlace, with shrinkInPlace): an
// elastic job of workers only that runs below its size (it went on
// without a lost worker in place, or started small) grows back toward it
// without restarting anyone. When the cluster has room, the driver starts
// one newcomer executor; once it registers, the roster appends its rank
// after the running ranks' and publishes a bigger membership, which the
// running ranks' executors hand their processes in the next heartbeat;
// Go trainers form the bigger world at their next step boundary
// (task.Env.Grow, collective's Comm.Grow) and hand the newcomer their
// state (task.CatchUp). One newcomer joins at a time. A newcomer that does
// not register within the registration timeout is dropped (the others
// never heard of it); one whose process is lost once it registered is a
// lost worker, which the others go on without in place. Jobs with input
// take a newcomer at an epoch's end instead (growinput.go).

// growsInPlace says whether a generation of slots grows back toward
// NumExecutors in place.
func (c Config) growsInPlace(slots []slot) bool {
	if c.FailurePolicy != PolicyElastic || !c.ShrinkInPlace || !c.GrowInPlace || c.isPush() {
		return false
	}
	// With input, newcomers join at an epoch's end (growinput.go), which
	// needs the feeds to hold it: fed by the executors (not read directly
	// by the process), under even batches.
	if len(c.Inputs) > 0 && (c.FeedMode == "direct" || c.EvenBatches == feed.EvenOff) {
		return false
	}
	for _, s := range slots {
		if s.role != RoleWorker {
			return false
		}
	}
	return true
}

// mayGrowLocked says whether the running gang may take a newcomer now: it
// grows in place, runs below maxWorkers, started, is not ending, and no
// other change of its membership is settling. g.mu is held.
func (g *roster) mayGrowLocked() bool {
	if !g.growWorkers || g.stopped || g.finished || g.failure != nil || g.held != nil ||
		g.growing != nil || g.shrinking != nil || g.replacing != nil || len(g.order) >= g.maxWorkers {
		return false
	}
	select {
	case <-g.ready:
		return true
	default:
		return false
	}
}

// size returns how many ranks the running gang has, and whether it may
// take a newcomer now.
func (g *roster) size() (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.order), g.mayGrowLocked()
}

// addNewcomer adds the member of executor id, which will join the running
// gang at the next rank once it registers; nil when the gang may not grow
// now.
func (g *roster) addNewcomer(id string) *member {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.mayGrowLocked() {
		return nil
	}
	m := &member{id: id, rank: len(g.order), role: RoleWorker, roleRank: len(g.order), newcomer: true, joined: make(chan struct{})}
	if g.growAtEpochs {
		m.signedIn, m.abandoned = make(chan struct{}), make(chan struct{})
	}
	g.members[id] = m
	g.growing = m
	return m
}

// grewLocked appends a registered newcomer's rank to the gang and makes
// the bigger membership: the running ranks keep theirs, the newcomer is
// in its first incarnation (1, so the epoch grows by one). g.mu is held.
func (g *roster) grewLocked(m *member) {
	m.rank, m.roleRank = len(g.order), len(g.order)
	g.order = append(g.order, m.id)
	g.peers = append(slices.Clone(g.peers), &driverpb.Peer{Rank: int32(m.rank), Host: m.host, Ports: m.ports, ExecutorId: m.id,
		Role: string(m.role), RoleRank: int32(m.roleRank)})
	g.onHost = nil
	var version int64
	incarnations := make([]uint32, len(g.peers))
	if g.membership != nil {
		version = g.membership.GetVersion()
		copy(incarnations, g.membership.GetIncarnations())
	}
	incarnations[m.rank] = 1
	g.membership = &driverpb.Membership{Version: version + 1, Peers: slices.Clone(g.peers), Incarnations: incarnations,
		Joined: int32(m.rank)}
	close(m.joined)
	g.settleLocked(&g.growing, m)
	if g.onGrow != nil {
		g.onGrow(m.where(g.mixed), len(g.order))
	}
}

// dropNewcomer gives up on a newcomer that did not register: the running
// ranks never heard of it.
func (g *roster) dropNewcomer(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.registered {
		return
	}
	delete(g.members, m.id)
	if g.growing == m {
		g.growing = nil
	}
	g.checkAllExitedLocked()
}

// growInPlace starts a newcomer when the running gang may grow and the
// cluster has room for it (room, which looks every
// spindle.failure.elasticWait); the newcomer's start and registration go
// on in the background, in group.
func (d *Driver) growInPlace(ctx context.Context, g *roster, spec ExecutorSpec, start func(func())) {
	n, ok := g.size()
	if !ok || !d.growRoom(ctx, n) {
		return
	}
	d.newcomers++
	m := g.addNewcomer(fmt.Sprintf("%s-n%d", spec.ID, d.newcomers))
	if m == nil {
		return
	}
	start(func() { d.startNewcomer(ctx, g, spec, m, n) })
}

// startNewcomer starts the executor of newcomer m, which joins the n
// running ranks, and waits for it to register, within the registration
// timeout; it drops m when it does not.
func (d *Driver) startNewcomer(ctx context.Context, g *roster, spec ExecutorSpec, m *member, n int) {
	c := d.cfg
	spec = replacementSpec(spec, m.id)
	spec.PreferredHosts = nil
	d.logger.Info("the cluster has room: starting a newcomer to grow in place", "executor", m.id, "ranks", n, "up_to", c.NumExecutors)
	if c.Console != nil {
		c.Console.Eprintln(fmt.Sprintf("job %s: the cluster has room for another executor; %s joins the %d running ranks in place (growing toward %d; not a restart)",
			c.JobID, m.id, n, c.NumExecutors))
	}
	gctx := ctx
	ctx, cancel := context.WithTimeout(ctx, c.RegistrationTimeout)
	defer cancel()
	err := d.cm.Request(ctx, []ExecutorSpec{spec})
	if err == nil {
		select {
		case <-m.joined:
			return
		case <-m.signedIn: // nil without input
			if err = awaitBoundary(gctx, m); err == nil {
				return
			}
		case <-ctx.Done():
			err = ctx.Err()
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("it did not register within %s", c.RegistrationTimeout)
			}
		}
	}
	g.dropNewcomer(m)
	if gctx.Err() != nil {
		return // the generation ended
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.StopGrace+5*time.Second)
	defer rcancel()
	_ = d.cm.Release(rctx, []string{m.id})
	d.logger.Warn("the newcomer did not join; the running ranks go on without it", "executor", m.id, "err", err)
	if c.Console != nil {
		c.Console.Eprintln(fmt.Sprintf("job %s: newcomer %s did not join (%v); the %d running ranks go on without it", c.JobID, m.id, err, n))
	}
}

// sayGrown tells the job log and console that a newcomer joined the gang
// in place, and counts it for the elastic loop.
func (d *Driver) sayGrown(who string, world int) {
	d.grown.Add(1)
	d.logger.Info("a newcomer joined; the ranks grow in place", "newcomer", who, "world_size", world)
	if c := d.cfg.Console; c != nil {
		c.Eprintln(fmt.Sprintf("job %s: %s joined; the running ranks grow to %d in place at their next step (not a restart)", d.cfg.JobID, who, world))
	}
}
