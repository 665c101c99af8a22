package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spindle-ml/spindle/collective"
)

// ErrNoMembership is returned by Env.Rejoin when the job cannot replace a
// lost rank in place: the executor hands the process no membership file.
var ErrNoMembership = errors.New("task: no membership to rejoin (the executor does not set SPINDLE_MEMBERSHIP)")

// Membership is who holds each rank of the running gang for Spindle's
// collectives: when a lost worker is replaced alone
// (spindle.failure.replaceWorkers), the replacement has a new peer address
// and the rank's next incarnation; when an elastic job goes on without a
// lost worker, the survivors form a smaller world, renumbered.
type Membership struct {
	// Version grows by one with every change; 0 is the gang as it
	// started.
	Version int64 `json:"version"`
	// Peers is every rank's peer address (host:port), in rank order. A
	// world that shrank lists fewer than the job started with: the
	// survivors in their old order, so a survivor's new rank is the index
	// of its own address.
	Peers []string `json:"peers"`
	// Incarnations counts, by rank, how often the rank's process was
	// replaced. Their sum, the membership's epoch, grows by one with every
	// change: a world that shrank keeps its survivors' incarnations and
	// adds the lost rank's next one to its rank 0's, so the processes of
	// the old world are refused.
	Incarnations []uint32 `json:"incarnations"`
	// Joined is the rank whose replacement made this version.
	Joined int `json:"joined"`
	// Left lists the ranks, numbered as in the previous version, that the
	// world lost when it shrank to this version.
	Left []int `json:"left,omitempty"`
}

// membershipEpoch numbers a membership: the sum of its incarnations, which grows
// with every version.
func membershipEpoch(incarnations []uint32) uint64 {
	var e uint64
	for _, n := range incarnations {
		e += uint64(n)
	}
	return e
}

// Membership reads the gang's current membership.
func (e Env) Membership() (Membership, error) {
	if e.MembershipFile == "" {
		return Membership{}, ErrNoMembership
	}
	b, err := os.ReadFile(e.MembershipFile)
	if err != nil {
		return Membership{}, fmt.Errorf("read the membership: %w", err)
	}
	var m Membership
	if err := json.Unmarshal(b, &m); err != nil {
		return Membership{}, fmt.Errorf("read the membership %s: %w", e.MembershipFile, err)
	}
	// A world may grow past the size the process started with (an
	// elastic job that started small growing in place).
	if len(m.Peers) < 1 || len(m.Incarnations) != len(m.Peers) {
		return Membership{}, fmt.Errorf("read the membership %s: %d peers and %d incarnations: need one of each per rank, at least one",
			e.MembershipFile, len(m.Peers), len(m.Incarnations))
	}
	return m, nil
}

// membershipPoll is how often Rejoin and Comm look at the membership file
// while they wait for a replacement.
const membershipPoll = 20 * time.Millisecond

// Rejoin recovers from err, a collective operation's failure on comm,
// when the failure lost one rank (collective.LostRank) and the job
// replaces that rank alone or goes on without it: it waits until the
// executor hands this process a newer membership than comm connects, then
// rejoins the lost rank's replacement (collective.Comm.Rejoin) or, when
// the world shrank, forms the smaller world with the other survivors
// (collective.Comm.Shrink: the returned communicator's Rank is this
// process's new rank). Either closes comm. The state of the ranks does
// not survive: call CatchUp next, as a replacement does after joining.
//
// It returns err itself when err lost no rank or the job has no
// membership, and waits for the new membership until ctx ends: when none
// comes, the driver stops the process (and restarts every rank).
func (e Env) Rejoin(ctx context.Context, comm *collective.Comm, err error) (*collective.Comm, error) {
	lost, ok := collective.LostRank(err)
	if !ok || e.MembershipFile == "" {
		return nil, err
	}
	m, ok := e.awaitNewer(ctx, comm.Incarnations())
	if !ok {
		return nil, fmt.Errorf("%w (waiting for a membership without rank %d's lost process: %v)", err, lost, ctx.Err())
	}
	if len(m.Peers) < comm.WorldSize() {
		c, serr := comm.Shrink(ctx, m.Peers, m.Incarnations)
		if serr != nil {
			return nil, fmt.Errorf("go on without rank %d in a world of %d (membership version %d): %w", lost, len(m.Peers), m.Version, serr)
		}
		return c, nil
	}
	c, rerr := comm.Rejoin(ctx, m.Peers, m.Incarnations)
	if rerr != nil {
		return nil, fmt.Errorf("rejoin rank %d's replacement (incarnation %d): %w", lost, m.Incarnations[lost], rerr)
	}
	return c, nil
}

// join joins the communicator cfg describes and, while it waits for the
// other ranks, watches the membership: when a rank is replaced before
// the communicator formed (its process died while the ranks joined), it
// joins again with the replacement, on the same peer port; when the job
// went on without it, it joins the smaller world, renumbered.
func (e Env) join(ctx context.Context, cfg collective.Config) (*collective.Comm, error) {
	for {
		var spare net.Listener
		if e.MembershipFile != "" && cfg.Listener != nil {
			var err error
			if spare, err = collective.DuplicateListener(cfg.Listener); err != nil {
				return nil, fmt.Errorf("keep the peer port while joining: %w", err)
			}
		}
		c, m, err := e.joinOnce(ctx, cfg)
		if err != nil && m == nil && ctx.Err() == nil {
			m, err = e.awaitReplacement(ctx, cfg, err)
		}
		if err != nil && m != nil && ctx.Err() == nil {
			next, nerr := e.nextJoin(cfg, m)
			if nerr != nil {
				if spare != nil {
					spare.Close()
				}
				return nil, fmt.Errorf("%w (%w)", nerr, err)
			}
			cfg, cfg.Listener = next, spare
			continue
		}
		// Joined (a rank lost since is a failed operation, for Rejoin),
		// or failed for another reason.
		if spare != nil {
			spare.Close()
		}
		return c, err
	}
}

// nextJoin is the Config that joins again after the membership changed to
// m while this rank joined cfg's: the same world with a lost rank's
// replacement; when an elastic job went on without the lost rank, the
// smaller world, this rank renumbered (collective's Config.Shrunk); when
// it grew meanwhile, the bigger one (Config.Grown).
func (e Env) nextJoin(cfg collective.Config, m *Membership) (collective.Config, error) {
	if len(m.Peers) > cfg.WorldSize {
		next, err := cfg.Grown(m.Peers, m.Incarnations)
		if err != nil {
			return collective.Config{}, fmt.Errorf("join the world of %d with its newcomers (membership version %d): %w", len(m.Peers), m.Version, err)
		}
		return next, nil
	}
	if len(m.Peers) < cfg.WorldSize {
		next, err := cfg.Shrunk(m.Peers, m.Incarnations)
		if err != nil {
			return collective.Config{}, fmt.Errorf("join the world of %d without the lost rank (membership version %d): %w", len(m.Peers), m.Version, err)
		}
		return next, nil
	}
	cfg.Peers, cfg.Incarnations = m.Peers, m.Incarnations
	return cfg, nil
}

// joinOnce joins the communicator cfg describes, unless the membership
// turns newer than cfg's first: it then gives up, and returns the newer
// membership with the failure.
func (e Env) joinOnce(ctx context.Context, cfg collective.Config) (*collective.Comm, *Membership, error) {
	jctx, cancel := context.WithCancel(ctx)
	newer := make(chan Membership, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if m, ok := e.awaitNewer(jctx, cfg.Incarnations); ok {
			newer <- m
			cancel()
		}
	}()
	c, err := collective.New(jctx, cfg)
	cancel()
	<-watched
	select {
	case m := <-newer:
		return c, &m, err
	default:
		return c, nil, err
	}
}

// awaitReplacement follows a join that failed with err: when err lost a
// rank and the job replaces lost ranks, it waits, as Rejoin does, for the
// membership that names the replacement. The survivor that learns of the
// replacement first gives up its join, and its failure notice, which
// blames the lost rank, can reach this rank before this rank's executor
// writes the new membership: the executors hear of it at different
// moments. It returns err itself for any other failure.
func (e Env) awaitReplacement(ctx context.Context, cfg collective.Config, err error) (*Membership, error) {
	lost, ok := collective.LostRank(err)
	if !ok || e.MembershipFile == "" {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Info("a rank was lost while the ranks joined: waiting for the membership to name its replacement",
		"component", "task", "rank", cfg.Rank, "lost_rank", lost, "err", err)
	m, ok := e.awaitNewer(ctx, cfg.Incarnations)
	if !ok {
		return nil, fmt.Errorf("%w (waiting for a membership without rank %d's lost process: %v)", err, lost, ctx.Err())
	}
	return &m, err
}

// awaitNewer waits until the membership is newer than the one whose
// incarnations are given (nil: every rank's first), its epoch greater;
// false when ctx ends first or the job keeps no membership.
func (e Env) awaitNewer(ctx context.Context, incarnations []uint32) (Membership, bool) {
	if e.MembershipFile == "" {
		return Membership{}, false
	}
	tick := time.NewTicker(membershipPoll)
	defer tick.Stop()
	for {
		if m, err := e.Membership(); err == nil && membershipEpoch(m.Incarnations) > membershipEpoch(incarnations) {
			return m, true
		}
		select {
		case <-ctx.Done():
			return Membership{}, false
		case <-tick.C:
		}
	}
}

// CatchUp brings every rank to the furthest point any rank of a rejoined
// communicator reached: each rank gives the number of steps it completed
// (-1 for a replacement, which has none) and its state, and every rank
// gets the state of the lowest rank with the most steps, and that count.
// state must have the same length on every rank. In data-parallel
// training the survivors of a lost rank differ by at most the step that
// failed: one that completed it hands the others its model.
func CatchUp(ctx context.Context, comm *collective.Comm, step int64, state []float64) (int64, error) {
	steps := make([]int64, comm.WorldSize())
	if err := collective.AllGather(ctx, comm, []int64{step}, steps); err != nil {
		return 0, fmt.Errorf("catch up: gather the ranks' steps: %w", err)
	}
	root := 0
	for r, s := range steps {
		if s > steps[root] {
			root = r
		}
	}
	if steps[root] < 0 {
		return 0, fmt.Errorf("catch up: no rank has a state to hand on (steps %v)", steps)
	}
	if err := collective.Broadcast(ctx, comm, state, root); err != nil {
		return 0, fmt.Errorf("catch up: take rank %d's state at step %d: %w", root, steps[root], err)
	}
	return steps[root], nil
}
