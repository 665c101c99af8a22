package task

import (
	"context"
	"fmt"
	"slices"

	"github.com/spindle-ml/spindle/collective"
)

// Grow lets an elastic job grow back toward its size in place
// (spindle.failure.shrinkInPlace): every rank of comm calls it at the same
// step boundary, between two steps. When the executor of any rank has
// handed its process a membership of a bigger world (the driver started
// newcomers, whose ranks come after this world's), every rank forms that
// world with them on its own peer port, keeping its rank (collective's
// Comm.Grow), closes comm and returns the new communicator and true; the
// caller then calls CatchUp with its step, as each newcomer does with -1,
// so the newcomers start from the furthest rank's state. Otherwise it
// returns comm and false.
//
// Grow costs one small allgather, by which the ranks agree whether to
// grow: a trainer whose steps are short may call it every few steps
// instead, as long as every rank calls it at the same steps. A failure of
// that allgather is a failed operation on comm (for Rejoin). While the
// ranks form the bigger world, a newcomer whose process is lost makes the
// driver go on without it, and Grow forms the world the membership then
// names.
func (e Env) Grow(ctx context.Context, comm *collective.Comm) (*collective.Comm, bool, error) {
	if e.MembershipFile == "" {
		return comm, false, nil
	}
	n := comm.WorldSize()
	mine := membershipEpoch(comm.Incarnations())
	var seen int64
	if m, err := e.Membership(); err == nil && len(m.Peers) > n && membershipEpoch(m.Incarnations) > mine {
		seen = int64(membershipEpoch(m.Incarnations))
	}
	all := make([]int64, n)
	if err := collective.AllGather(ctx, comm, []int64{seen}, all); err != nil {
		return comm, false, err
	}
	target := slices.Max(all)
	if target == 0 {
		return comm, false, nil
	}
	// Another rank's executor may have heard of the newcomers first: this
	// rank's writes the same membership within a heartbeat.
	m, ok := e.awaitEpoch(ctx, uint64(target))
	if !ok {
		comm.Close()
		return nil, false, fmt.Errorf("grow the world of %d in place: no membership at epoch %d came: %w", n, target, ctx.Err())
	}
	cfg, err := comm.GrowConfig(m.Peers, m.Incarnations)
	if err != nil {
		return nil, false, fmt.Errorf("grow the world of %d to %d in place (membership version %d): %w", n, len(m.Peers), m.Version, err)
	}
	// Bounded: a newcomer that registered but never joins must not hold
	// the others forever (the driver hears of it only when its process
	// ends); they then fail, and the gang restarts.
	jctx, cancel := context.WithTimeout(ctx, 2*cfg.ConnectTimeout)
	defer cancel()
	c, err := e.join(jctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("grow the world of %d to %d in place (membership version %d): %w", n, len(m.Peers), m.Version, err)
	}
	return c, true, nil
}

// awaitEpoch waits until the membership's epoch is at least epoch; false
// when ctx ends first.
func (e Env) awaitEpoch(ctx context.Context, epoch uint64) (Membership, bool) {
	if epoch == 0 {
		return Membership{}, false
	}
	return e.awaitNewer(ctx, []uint32{uint32(epoch - 1)})
}
