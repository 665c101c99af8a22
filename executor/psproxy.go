package executor

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/proxy"
	"github.com/spindle-ml/spindle/task"
)

// psSocket is where the parameter-server proxy of a task listens, in its
// socket directory.
func psSocket(sockDir string) string {
	return filepath.Join(sockDir, "ps.sock")
}

// psProxied says whether this rank's process gets a parameter-server
// proxy (SPINDLE_PS_SOCKET): every rank but the servers of a job with the
// built-in parameter server.
func psProxied(t *Task, id identity) bool {
	role, _ := peerRole(id.peers[id.rank])
	return t.PsStaleness != "" && !t.BuiltinPs && role != rolePS
}

// newPSProxy listens at psSocket(sockDir) for the training process and
// forwards its calls to the job's parameter servers, as worker of this
// rank, authenticated with the peer token derived from jobSecret. The
// connection to the servers is made on the first call; pulls and pushes
// go over dataLink (the training process's SPINDLE_COLLECTIVE_LINK), as
// a Go trainer's would.
func newPSProxy(sockDir string, id identity, jobSecret, dataLink string, logger *slog.Logger) (*proxy.Proxy, error) {
	env, err := psClientEnv(id, jobSecret)
	if err != nil {
		return nil, fmt.Errorf("parameter-server proxy: %w", err)
	}
	env.DataLink = dataLink
	return proxy.New(proxy.Config{
		Path:    psSocket(sockDir),
		Logger:  logger,
		Connect: func() (*client.Client, error) { return client.FromRanks(env.PSRanks(), logger) },
	})
}

// psClientEnv is the view of the job a Go trainer of this rank reads
// from its environment, reduced to what client.FromRanks needs: the ranks
// and roles, their peer addresses and the peer token. The proxy thus
// finds the servers and its worker index exactly as a Go trainer would,
// and refuses what a Go trainer's client refuses (a server's own rank).
func psClientEnv(id identity, jobSecret string) (task.Env, error) {
	peers := make([]string, len(id.peers))
	for i, p := range id.peers {
		var err error
		if peers[i], err = peerAddr(p, portPeer); err != nil {
			return task.Env{}, err
		}
	}
	var roles []task.RoleSize
	for _, s := range roleSizes(id.peers) {
		roles = append(roles, task.RoleSize{Role: s.role, Size: s.n})
	}
	role, roleRank := peerRole(id.peers[id.rank])
	return task.Env{Rank: id.rank, WorldSize: id.worldSize, Role: role, RoleRank: roleRank, Roles: roles,
		Peers: peers, PeerToken: peerToken(jobSecret), PeerListenFD: -1}, nil
}

// envValue is the value of name in env (KEY=VALUE entries), "" when unset.
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}
