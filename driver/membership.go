package driver

import (
	"slices"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// The collective membership of a running gang. When a lost worker is
// replaced alone (replace.go), the survivors of a job whose ranks talk to
// each other (Spindle's Go collectives) must learn the replacement's peer
// address and its incarnation to rejoin it in place (collective's
// Comm.Rejoin): each replacement that registers makes a new version of the
// membership, which the survivors' executors get in their next heartbeat
// response and hand to their training processes, and which the
// replacement gets at registration.

// newMembershipLocked records the membership that m, a worker replacement
// that just registered at its rank, makes; g.mu is held and g.peers
// already names m.
func (g *roster) newMembershipLocked(m *member) {
	var version int64
	incarnations := make([]uint32, len(g.peers))
	if g.membership != nil {
		version = g.membership.GetVersion()
		copy(incarnations, g.membership.GetIncarnations())
	}
	incarnations[m.rank] = uint32(m.replacement)
	// A new message each time: the responses that carry an older one may
	// still be being sent.
	g.membership = &driverpb.Membership{Version: version + 1, Peers: slices.Clone(g.peers), Incarnations: incarnations,
		Joined: int32(m.rank)}
}

// membershipAfterLocked returns the gang's membership when it is newer than the
// version an executor has; nil when it is not (or there is none). g.mu is
// held.
func (g *roster) membershipAfterLocked(version int64) *driverpb.Membership {
	if g.membership == nil || g.membership.GetVersion() <= version {
		return nil
	}
	return g.membership
}

// currentMembership returns the gang's membership; nil before the first
// replacement.
func (g *roster) currentMembership() *driverpb.Membership {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.membership
}
