package driver

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// Shrinking in place (spindle.failure.shrinkInPlace): under the elastic
// policy, a job of workers only whose worker is lost goes on with the
// others' processes instead of restarting them as a smaller gang. The
// roster drops the lost member, renumbers the survivors in their old rank
// order and publishes a smaller membership, which the survivors' executors
// get in their next heartbeat response and hand to their processes
// (SPINDLE_MEMBERSHIP); Go trainers re-form the world with it
// (task.Env.Rejoin, collective's Comm.Shrink). A survivor that fails
// within replaceSettle of the shrink (a gloo or NCCL group's peers do, a
// Go trainer that does not rejoin) fails the generation, and the elastic
// loop restarts the gang smaller as it always did.
//
// A job with input shrinks in place once per generation: the survivors'
// feeds are dealt the lost rank's rest of the epoch (inplacefeed.go). A
// job that reads its input itself (--feed direct) or has it pushed
// restarts smaller from its checkpoint, where elasticStart deals that
// rest exactly.

// shrinksInPlace says whether a generation of slots goes on without a lost
// worker in place, and why not when it does not.
func (c Config) shrinksInPlace(slots []slot) (bool, string) {
	switch {
	case c.FailurePolicy != PolicyElastic || !c.ShrinkInPlace:
		return false, ""
	case len(c.Inputs) > 0 && c.FeedMode == "direct":
		return false, "the job reads its input itself (--feed direct): a lost rank's rest of the epoch cannot be dealt to running processes, so the gang restarts smaller at its checkpoint"
	case c.isPush():
		return false, "the job's input is pushed (flight-put): a lost rank's rest cannot be dealt to running processes, so the gang restarts smaller at its checkpoint"
	case len(slots) <= c.MinExecutors:
		return false, fmt.Sprintf("the generation runs %d workers, spindle.failure.minExecutors", len(slots))
	}
	for _, s := range slots {
		if s.role != RoleWorker {
			return false, "the job has roles other than workers"
		}
	}
	return true, ""
}

// shrinkLocked goes on without m, a lost worker whose loss msg would fail
// the generation, and says whether it did; g.mu is held. It does not when
// the generation does not shrink in place, m is not a running worker of a
// started gang, the survivors would be fewer than minWorkers, an earlier
// loss has not settled (the survivors are not healthy), or the job has no
// restarts left.
func (g *roster) shrinkLocked(m *member, msg string, blameless bool) bool {
	if !g.shrinkWorkers || m.left || g.shrinking != nil || len(g.order)-1 < g.minWorkers || (g.shrinkOnce && (g.shrinks > 0 || g.replanned)) {
		return false
	}
	note, _, ok := g.chargeLossLocked(m, msg, blameless)
	if !ok {
		return false
	}
	lost := m.rank
	m.exited, m.left = true, true
	m.lossMsg, m.lossBlameless = msg, blameless
	g.renumberWithoutLocked(m)
	g.shrinks++
	if g.onLeftBehind != nil {
		g.onLeftBehind(m.id, lost, g.membership.GetVersion(), slices.Clone(g.order), m.loss(msg, blameless))
	}
	g.shrinking = m
	g.settleLocked(&g.shrinking, m)
	if g.onShrink != nil {
		// The loss without the stderr the job log has anyway.
		first, _, _ := strings.Cut(msg, "\n")
		first, _, _ = strings.Cut(first, "; last lines of its stderr:")
		g.onShrink(lost, len(g.order), fmt.Sprintf("%s; the other %d ranks go on without it in place (%s)", first, len(g.order), note))
	}
	g.checkAllExitedLocked()
	return true
}

// renumberWithoutLocked drops m from the gang: the others keep their
// order and take ranks 0 to n-2, and the membership says so; g.mu is held.
func (g *roster) renumberWithoutLocked(m *member) {
	lost := m.rank
	var incarnations []uint32
	var version int64
	if g.membership != nil {
		version = g.membership.GetVersion()
		incarnations = g.membership.GetIncarnations()
	}
	old := make([]uint32, len(g.order))
	copy(old, incarnations)
	order := make([]string, 0, len(g.order)-1)
	peers := make([]*driverpb.Peer, 0, len(g.order)-1)
	kept := make([]uint32, 0, len(g.order)-1)
	for r, id := range g.order {
		if id == m.id {
			continue
		}
		o := g.members[id]
		o.rank, o.roleRank = len(order), len(order)
		order = append(order, id)
		p := proto.CloneOf(g.peers[r])
		p.Rank, p.RoleRank = int32(o.rank), int32(o.roleRank)
		peers = append(peers, p)
		kept = append(kept, old[r])
	}
	// The lost rank's next incarnation goes to the new rank 0, so the
	// membership's epoch grows by one and the old world's processes are
	// refused.
	kept[0] += old[lost] + 1
	g.order, g.peers, g.onHost = order, peers, nil
	// A new message: responses carrying the older one may still be sent.
	g.membership = &driverpb.Membership{Version: version + 1, Peers: slices.Clone(peers), Incarnations: kept,
		Joined: -1, Left: []int32{int32(lost)}}
}

// goOnWithoutLocked keeps the other ranks running after m's loss (msg):
// a replacement takes its rank, or an elastic gang goes on without it.
// It says whether either happened; g.mu is held.
func (g *roster) goOnWithoutLocked(m *member, msg string, blameless bool) bool {
	return g.replaceLocked(m, msg, blameless) || g.shrinkLocked(m, msg, blameless)
}

// whileShrinkingLocked explains a failure that comes while the gang has
// not settled after going on without a lost worker; "" otherwise. g.mu is
// held.
func (g *roster) whileShrinkingLocked() string {
	if g.shrinking == nil {
		return ""
	}
	return fmt.Sprintf(" (soon after %s was left behind: the other ranks did not go on in place, so the gang restarts smaller)",
		g.shrinking.where(g.mixed))
}

// sayShrinking tells the job log and console that the gang goes on without
// a lost worker, and counts the shrink for the elastic loop.
func (d *Driver) sayShrinking(rank, world int, msg string) {
	d.shrunk.Add(1)
	d.logger.Warn("worker lost; the others go on without it in place", "rank", rank, "world_size", world, "reason", msg)
	if d.obs != nil {
		d.obs.renumber(rank, world)
	}
	if c := d.cfg.Console; c != nil {
		c.Eprintln(fmt.Sprintf("job %s: %s", d.cfg.JobID, msg))
	}
}
