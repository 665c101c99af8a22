package ps

import (
	"errors"
	"strings"
	"testing"
)

// TestRanksChecks: Ranks that cannot run a server or reach the servers are
// bad input (ErrBadEnv) naming the variable at fault; good ones pass and
// give the servers' addresses.
func TestRanksChecks(t *testing.T) {
	peers := []string{"h0:1", "h1:1", "h2:1"}
	server := Ranks{Rank: 2, WorldSize: 3, Role: "ps", RoleRank: 0, Peers: peers, First: 2, Servers: 1, PeerToken: "t"}
	worker := server
	worker.Rank, worker.Role = 0, "chief"
	if err := server.CheckServer(); err != nil {
		t.Fatalf("a good server: %v", err)
	}
	if err := worker.CheckClient(); err != nil {
		t.Fatalf("a good worker: %v", err)
	}
	if got := server.ServerAddrs(); len(got) != 1 || got[0] != "h2:1" {
		t.Fatalf("ServerAddrs = %v", got)
	}
	noPeers, noToken, onlyPS := server, worker, server
	noPeers.Peers = nil
	noToken.PeerToken = ""
	onlyPS.WorldSize, onlyPS.Peers, onlyPS.First, onlyPS.Servers = 1, peers[:1], 0, 1
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a worker as a server", worker.CheckServer(), `role "chief"`},
		{"no peers (server)", noPeers.CheckServer(), "SPINDLE_PEERS"},
		{"no peers (client)", func() error { r := worker; r.Peers = nil; return r.CheckClient() }(), "SPINDLE_PEERS"},
		{"no token", noToken.CheckClient(), "SPINDLE_PEER_TOKEN"},
		{"no workers", onlyPS.CheckServer(), "SPINDLE_ROLES"},
	} {
		if !errors.Is(tc.err, ErrBadEnv) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadEnv naming %s", tc.name, tc.err, tc.want)
		}
	}
}
