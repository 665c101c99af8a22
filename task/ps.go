package task

import (
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/ps"
)

// PSRanks is this rank's view of its job's parameter servers, as
// ps/server and ps/client take it: the parameter server's packages do not
// read a task's environment themselves.
func (e Env) PSRanks() ps.Ranks {
	first, n := e.RoleRanks(envcontract.RolePS)
	return ps.Ranks{Rank: e.Rank, WorldSize: e.WorldSize, Role: e.Role, RoleRank: e.RoleRank, Peers: e.Peers,
		First: first, Servers: n, PeerToken: e.PeerToken, DataLink: e.DataLink}
}
