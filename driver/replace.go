package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// Replacing one lost worker (spindle.failure.replaceWorkers): under the
// restart policy, a job of workers only whose worker is lost starts one
// new executor for that rank, which resumes from the newest complete
// checkpoint with its feed where that checkpoint left the rank, while the
// other ranks keep running. It is the parameter servers' replacement
// (replacePS) for workers: the roster marks the lost member exited and
// hands it to the driver, which requests the new executor; the roster
// puts it at the lost one's rank when it registers. When the replacement
// cannot happen (another rank fails meanwhile, no executor starts, none
// registers) the job fails as it would have, and the restart policy
// restarts every rank, the job log saying why.

// replaceLocked starts replacing m, a worker whose loss msg would fail
// the job, and says whether it did; g.mu is held. It does not when the
// job does not replace workers, m is not a running worker of a started
// gang, another replacement is on its way (the survivors are not
// healthy: they are failing in turn, as a gloo or NCCL group's do), or
// the job has no restarts left.
func (g *roster) replaceLocked(m *member, msg string, blameless bool) bool {
	if !g.replaceWorkers || g.replacing != nil {
		return false
	}
	note, excluded, ok := g.chargeLossLocked(m, msg, blameless)
	if !ok {
		return false
	}
	m.excludedAfter = excluded
	m.exited = true
	m.lossMsg, m.lossBlameless = msg, blameless
	g.replacing = m
	if g.onReplace != nil {
		first, _, _ := strings.Cut(msg, "\n")
		g.onReplace(m.rank, fmt.Sprintf("%s; replacing it alone (%s) while the other ranks keep running", first, note))
	}
	select {
	case g.lost <- m:
	default:
		g.replacing = nil
		g.failLocked(m.loss(msg+"; it could not be replaced alone (too many losses at once)", blameless))
	}
	g.checkAllExitedLocked()
	return true
}

// chargeLossLocked counts m's loss (msg) against the job's restarts when
// the others may keep running without m: m is a registered worker of a
// gang that started, and the job is not ending nor holding a failure. It
// returns the budget's note and the hosts a replacement keeps off, and
// false when the others may not keep running or no restarts are left.
// g.mu is held.
func (g *roster) chargeLossLocked(m *member, msg string, blameless bool) (note string, excluded []string, ok bool) {
	if m.role != RoleWorker || !m.registered || g.stopped || g.failure != nil || g.held != nil || g.budget == nil {
		return "", nil, false
	}
	select {
	case <-g.ready:
	default:
		return "", nil, false // the gang never started: nothing keeps running
	}
	loss, _ := m.loss(msg, blameless).(*lossError)
	return g.budget(loss)
}

// whileReplacingLocked explains a failure that comes while a lost worker
// is being replaced; "" when none is. g.mu is held.
func (g *roster) whileReplacingLocked() string {
	if g.replacing == nil {
		return ""
	}
	return fmt.Sprintf(" (while %s was being replaced alone: the other ranks did not keep running, so every rank restarts)",
		g.replacing.where(g.mixed))
}

// addWorkerReplacement adds the member that replaces the lost worker at
// its rank; nil when the job is ending.
func (g *roster) addWorkerReplacement(lost *member) *member {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || g.finished || g.failure != nil || g.replacing != lost {
		return nil
	}
	g.replaced++
	base, _, _ := strings.Cut(lost.id, "-r")
	m := &member{id: fmt.Sprintf("%s-r%d", base, g.replaced), rank: lost.rank, role: lost.role, roleRank: lost.roleRank,
		replaces: lost.id, replacement: lost.replacement + 1, joined: make(chan struct{})}
	g.members[m.id] = m
	g.order[m.rank] = m.id
	return m
}

// replaceSettle is how long after a replacement registered the other
// ranks must keep running for the replacement to count as done: a rank
// that fails sooner is taken for a survivor that did not outlive its lost
// peer (a gloo or NCCL group's do, within moments), and every rank is
// restarted rather than replaced one by one.
const replaceSettle = 2 * time.Second

// joinedLocked puts a registered worker replacement in the cluster spec
// at its rank; g.mu is held. The survivors keep the spec they have.
func (g *roster) joinedLocked(m *member) {
	peers := slices.Clone(g.peers)
	peers[m.rank] = &driverpb.Peer{Rank: int32(m.rank), Host: m.host, Ports: m.ports, ExecutorId: m.id,
		Role: string(m.role), RoleRank: int32(m.roleRank)}
	g.peers = peers
	g.newMembershipLocked(m)
	close(m.joined)
	g.settleLocked(&g.replacing, g.replacing)
}

// settleLocked clears *change, the member whose loss, replacement or
// arrival is changing the gang, once settle passed, unless another took
// its place meanwhile; g.mu is held.
func (g *roster) settleLocked(change **member, m *member) {
	time.AfterFunc(g.settle, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if *change == m {
			*change = nil
		}
	})
}

// replaceFailed gives up on replacing lost with m (nil when it was never
// added): the job fails with lost's loss, saying why, and the restart
// policy restarts every rank.
func (g *roster) replaceFailed(lost, m *member, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m != nil && !m.registered && !m.exited {
		m.exited = true
		g.checkAllExitedLocked()
	}
	if g.replacing != lost {
		return
	}
	g.replacing = nil
	g.failLocked(lost.loss(fmt.Sprintf("%s; it could not be replaced alone (%s), so every rank restarts", lost.lossMsg, why), lost.lossBlameless))
}

// replaceWorker starts the executor that replaces a lost worker and waits
// for it to register, within the registration timeout.
func (d *Driver) replaceWorker(ctx context.Context, g *roster, specs []ExecutorSpec, lost *member) {
	m := g.addWorkerReplacement(lost)
	if m == nil {
		return
	}
	spec := replacementSpec(specs[lost.rank], m.id)
	spec.ExcludedHosts = lost.excludedAfter
	d.logger.Info("starting a replacement worker", "rank", lost.rank, "replaces", lost.id, "executor", m.id)
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RegistrationTimeout)
	defer cancel()
	if err := d.cm.Request(ctx, []ExecutorSpec{spec}); err != nil {
		d.logger.Warn("no replacement worker; restarting every rank", "rank", lost.rank, "err", err)
		g.replaceFailed(lost, m, fmt.Sprintf("no executor was started for it: %v", err))
		return
	}
	select {
	case <-m.joined:
		d.logger.Info("the replacement worker registered; it resumes at the newest checkpoint", "rank", m.rank, "executor", m.id)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			d.logger.Warn("the replacement worker did not register; restarting every rank", "rank", lost.rank, "executor", m.id)
			g.replaceFailed(lost, m, fmt.Sprintf("executor %s did not register within %s", m.id, d.cfg.RegistrationTimeout))
		}
	}
}

// replacementSpec is spec for the executor id, which replaces the one
// spec started.
func replacementSpec(spec ExecutorSpec, id string) ExecutorSpec {
	spec.ID = id
	spec.Args = slices.Clone(spec.Args)
	for i := range spec.Args[:len(spec.Args)-1] {
		if spec.Args[i] == "--id" {
			spec.Args[i+1] = id
		}
	}
	return spec
}

// replacementBudget counts a worker replacement against the job's
// restarts, as a restart of every rank would count, and against its host.
// It returns the note that says which count it used and the hosts the
// replacement keeps off, and false when the count is used up (the loss
// then fails the generation, which ends the job as a restart would).
func (d *Driver) replacementBudget(rc *restartCounts) func(loss *lossError) (string, []string, bool) {
	c := d.cfg
	return func(loss *lossError) (string, []string, bool) {
		if loss == nil {
			return "", nil, false
		}
		if loss.blameless {
			if rc.blameless >= c.MaxBlamelessRestarts {
				return "", nil, false
			}
			rc.blameless++
			return fmt.Sprintf("not counted against spindle.failure.maxRestarts; %d of %d such restarts", rc.blameless, c.MaxBlamelessRestarts),
				slices.Clone(rc.excluded), true
		}
		if rc.counted >= c.MaxRestarts {
			return "", nil, false
		}
		rc.counted++
		rc.failedOn(loss, c.HostMaxFailures)
		return fmt.Sprintf("restart %d of %d", rc.counted, c.MaxRestarts), slices.Clone(rc.excluded), true
	}
}

// replacesWorkers says whether a generation of slots replaces a lost
// worker alone: under the restart policy with spindle.failure.replaceWorkers,
// in a job of more than one worker and no other role.
func (c Config) replacesWorkers(slots []slot) bool {
	if c.FailurePolicy != PolicyRestart || !c.ReplaceWorkers || len(slots) < 2 {
		return false
	}
	for _, s := range slots {
		if s.role != RoleWorker {
			return false
		}
	}
	return true
}

// sayReplacing tells the job log and console that a lost worker is being
// replaced alone.
func (d *Driver) sayReplacing(rank int, msg string) {
	d.logger.Warn("worker lost; replacing it alone", "rank", rank, "reason", msg)
	if d.obs != nil {
		d.obs.record(jobview.Event{Kind: jobview.KindReplace, Rank: rank, Reason: msg})
	}
	if c := d.cfg.Console; c != nil {
		c.Eprintln(fmt.Sprintf("job %s: %s", d.cfg.JobID, msg))
	}
}
