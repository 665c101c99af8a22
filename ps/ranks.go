package ps

import (
	"errors"
	"fmt"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// ErrBadEnv marks Ranks that do not describe a rank of a job with
// parameter servers: bad input, found before anything ran. Errors wrapping
// it name the environment variable at fault.
var ErrBadEnv = errors.New("ps: bad environment")

// Ranks is what a parameter server or client needs to know of its job:
// who this rank is, where every rank listens and which ranks serve. The
// caller builds it, from task.Env in a training process or spindle ps
// serve, so that this package does not read the environment itself.
type Ranks struct {
	Rank      int      // this rank
	WorldSize int      // the job's ranks
	Role      string   // this rank's role (envcontract.RolePS for a server)
	RoleRank  int      // this rank's index among the ranks of its role
	Peers     []string // every rank's peer address (host:port), by rank
	First     int      // the first rank of role ps
	Servers   int      // the ranks of role ps, from First on
	PeerToken string   // the job's peer token, which every call carries
	DataLink  string   // how pulls and pushes travel (SPINDLE_COLLECTIVE_LINK)
}

// ServerAddrs returns the servers' peer addresses, by server index.
func (r Ranks) ServerAddrs() []string { return r.Peers[r.First : r.First+r.Servers] }

// checkPeers reports, wrapping ErrBadEnv, a job whose peer addresses are
// not all known.
func (r Ranks) checkPeers() error {
	if len(r.Peers) != r.WorldSize || r.First < 0 || r.First+r.Servers > len(r.Peers) {
		return fmt.Errorf("%w: %s is not set", ErrBadEnv, envcontract.Peers)
	}
	return nil
}

// CheckServer reports, wrapping ErrBadEnv, Ranks under which this rank
// cannot run a parameter server.
func (r Ranks) CheckServer() error {
	if r.Role != envcontract.RolePS || r.Servers == 0 {
		return fmt.Errorf("%w: rank %d has role %q: only ranks of role ps run a parameter server", ErrBadEnv, r.Rank, r.Role)
	}
	if err := r.checkPeers(); err != nil {
		return err
	}
	if r.WorldSize-r.Servers < 1 {
		return fmt.Errorf("%w: %s: a job of only parameter servers has no workers", ErrBadEnv, envcontract.Roles)
	}
	return nil
}

// CheckClient reports, wrapping ErrBadEnv, Ranks under which this rank
// cannot reach the servers as a worker. A job without servers is not
// checked here (the client says so with its own error).
func (r Ranks) CheckClient() error {
	if err := r.checkPeers(); err != nil {
		return err
	}
	if r.PeerToken == "" {
		return fmt.Errorf("%w: %s is not set: the servers take only authenticated calls", ErrBadEnv, envcontract.PeerToken)
	}
	return nil
}
