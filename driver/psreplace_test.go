package driver

import (
	"testing"
)

// A parameter server lost while the rest of the gang is still registering
// is replaced; its replacement may register before the gang is complete,
// or after every other member. Either way it takes the lost server's place
// in the first gang's spec (no ring is running yet for it to rejoin), and
// the gang becomes ready once, when every slot has a registered member.
func TestPSReplacedBeforeTheGangRegistered(t *testing.T) {
	for _, last := range []string{"replacement", "worker"} {
		t.Run(last+" registers last", func(t *testing.T) {
			g := newRosterOf(layout([]RoleSpec{{Role: RoleWorker, Count: 2}, {Role: RolePS, Count: 2}}))
			g.psSpares = 1
			register(t, g, "exec-2", "ps-host")
			register(t, g, "exec-0", "w0")
			g.executorGone(Event{Kind: ExecutorLost, ExecutorID: "exec-2", Message: "node lost"})
			if g.err() != nil {
				t.Fatalf("a spare server's loss failed the job: %v", g.err())
			}
			lost := <-g.lost
			m := g.addReplacement(lost)
			if m == nil {
				t.Fatal("no replacement")
			}
			register(t, g, "exec-3", "ps-host-2")
			if last == "worker" {
				register(t, g, m.id, "new-ps-host")
				if closed(g.ready) {
					t.Fatal("ready with exec-1 not registered")
				}
				register(t, g, "exec-1", "w1")
			} else {
				register(t, g, "exec-1", "w1")
				if closed(g.ready) {
					t.Fatal("ready with the replacement not registered")
				}
				register(t, g, m.id, "new-ps-host")
			}
			if !closed(g.ready) {
				t.Fatal("not ready after every slot registered")
			}
			peers := g.peerList()
			if len(peers) != 4 || peers[2].GetHost() != "new-ps-host" || peers[2].GetExecutorId() != m.id {
				t.Fatalf("peers %v, want the replacement at rank 2", peers)
			}
			if m.rejoins {
				t.Error("the replacement rejoins a ring that never ran")
			}
			if g.psLost != 0 {
				t.Errorf("psLost = %d after the replacement joined, want 0", g.psLost)
			}
		})
	}
}
