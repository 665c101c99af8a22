package task

import (
	"reflect"
	"testing"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/ps"
)

// PSRanks gives the parameter server's packages every fact of the
// environment they need: who this rank is, every peer, and which ranks
// serve.
func TestPSRanks(t *testing.T) {
	env := fullEnv()
	env[EnvWorldSize], env[EnvRank], env[EnvLocalWorldSize] = "4", "1", "4"
	env[EnvPeers] = "a:1,b:1,c:1,d:1"
	env[EnvRoles] = "worker:2," + envcontract.RolePS + ":2"
	e, err := fromLookup(lookupIn(env))
	if err != nil {
		t.Fatal(err)
	}
	e.PeerToken, e.DataLink = "token", "tcp"
	got := e.PSRanks()
	want := ps.Ranks{Rank: 1, WorldSize: 4, Role: e.Role, RoleRank: e.RoleRank, Peers: []string{"a:1", "b:1", "c:1", "d:1"},
		First: 2, Servers: 2, PeerToken: "token", DataLink: "tcp"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PSRanks() = %+v, want %+v", got, want)
	}
	if err := got.CheckClient(); err != nil {
		t.Errorf("a worker's ranks: %v", err)
	}
}
