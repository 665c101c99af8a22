package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// and the rank's next incarnation.
type Membership struct {
	// Version grows by one with every replacement; 0 is the gang as it
	// started.
	Version int64 `json:"version"`
	// Peers is every rank's peer address (host:port), in rank order.
	Peers []string `json:"peers"`
	// Incarnations counts, by rank, how often the rank's process was
	// replaced.
	Incarnations []uint32 `json:"incarnations"`
	// Joined is the rank whose replacement made this version.
	Joined int `json:"joined"`
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
	if len(m.Peers) != e.WorldSize || len(m.Incarnations) != e.WorldSize {
		return Membership{}, fmt.Errorf("read the membership %s: %d peers and %d incarnations for a world of %d",
			e.MembershipFile, len(m.Peers), len(m.Incarnations), e.WorldSize)
	}
	return m, nil
}

// membershipPoll is how often Rejoin looks at the membership file while
// it waits for a replacement.
const membershipPoll = 20 * time.Millisecond

// Rejoin recovers from err, a collective operation's failure on comm,
// when the failure lost one rank (collective.LostRank) and the job
// replaces that rank alone: it waits until the executor hands this process
// a membership in which the lost rank has a newer incarnation than comm
// connects, then rejoins it (collective.Comm.Rejoin), which closes comm.
// The state of the ranks does not survive: call CatchUp next, as the
// replacement does after joining.
//
// It returns err itself when err lost no rank or the job has no
// membership, and waits for the replacement until ctx ends: when none
// comes, the driver stops the process (and restarts every rank).
func (e Env) Rejoin(ctx context.Context, comm *collective.Comm, err error) (*collective.Comm, error) {
	lost, ok := collective.LostRank(err)
	if !ok || e.MembershipFile == "" {
		return nil, err
	}
	was := comm.Incarnations()[lost]
	tick := time.NewTicker(membershipPoll)
	defer tick.Stop()
	for {
		m, merr := e.Membership()
		if merr != nil && !errors.Is(merr, os.ErrNotExist) {
			return nil, fmt.Errorf("%w (rank %d lost; no replacement to rejoin: %v)", err, lost, merr)
		}
		if merr == nil && m.Incarnations[lost] > was {
			c, rerr := comm.Rejoin(ctx, m.Peers, m.Incarnations)
			if rerr != nil {
				return nil, fmt.Errorf("rejoin rank %d's replacement (incarnation %d): %w", lost, m.Incarnations[lost], rerr)
			}
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waiting for rank %d's replacement: %v)", err, lost, ctx.Err())
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
