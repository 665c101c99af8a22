package driver

import (
	"slices"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// TestReplacementMakesANewMembership: once a lost worker's replacement
// registers, the survivors' heartbeats carry the new membership (the
// replacement's address, the rank's next incarnation) until they say
// they have it, and a second replacement of the same rank makes the
// next version with the incarnation after that.
func TestReplacementMakesANewMembership(t *testing.T) {
	g := replacingRoster(t, 2)
	if hb, _ := g.heartbeat("exec-0", nil, 0); hb.GetMembership() != nil {
		t.Fatalf("membership %v before any replacement", hb.GetMembership())
	}
	replace := func(lostID, host string) *member {
		t.Helper()
		if err := g.exit(&driverpb.ExitReport{ExecutorId: lostID, Signal: "SIGKILL"}); err != nil {
			t.Fatal(err)
		}
		m := g.addWorkerReplacement(<-g.lost)
		if hb, _ := g.heartbeat("exec-0", nil, g.currentMembership().GetVersion()); hb.GetMembership() != nil {
			t.Fatalf("membership %v before the replacement registered", hb.GetMembership())
		}
		register(t, g, m.id, host)
		g.mu.Lock()
		g.replacing = nil // settled
		g.mu.Unlock()
		return m
	}
	m := replace("exec-1", "h2")
	hb, _ := g.heartbeat("exec-0", nil, 0)
	got := hb.GetMembership()
	if got.GetVersion() != 1 || got.GetJoined() != 1 || !slices.Equal(got.GetIncarnations(), []uint32{0, 1, 0}) ||
		got.GetPeers()[1].GetHost() != "h2" || got.GetPeers()[1].GetExecutorId() != m.id {
		t.Fatalf("membership %v, want version 1 with rank 1's replacement on h2 in incarnation 1", got)
	}
	if hb, _ := g.heartbeat("exec-2", nil, 1); hb.GetMembership() != nil {
		t.Fatalf("an executor that has version 1 got it again: %v", hb.GetMembership())
	}
	replace(m.id, "h3")
	hb, _ = g.heartbeat("exec-2", nil, 1)
	if got := hb.GetMembership(); got.GetVersion() != 2 || !slices.Equal(got.GetIncarnations(), []uint32{0, 2, 0}) || got.GetPeers()[1].GetHost() != "h3" {
		t.Fatalf("membership %v, want version 2 with rank 1 in incarnation 2 on h3", got)
	}
}
