package executor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/envcontract"
)

// The roles a driver gives ranks (driver.Role spells the same names).
const (
	roleWorker = envcontract.RoleWorker
	roleChief  = envcontract.RoleChief
	rolePS     = envcontract.RolePS
)

// feedModeNone is SPINDLE_FEED_MODE for a rank whose role gets no feed.
const feedModeNone = envcontract.FeedNone

// peerRole returns a published peer's role and its rank within the role.
// A driver that predates roles publishes none: every rank is a worker.
func peerRole(p *driverpb.Peer) (string, int) {
	if p.GetRole() == "" {
		return roleWorker, int(p.GetRank())
	}
	return p.GetRole(), int(p.GetRoleRank())
}

// roleSize is how many ranks a role has.
type roleSize struct {
	role string
	n    int
}

// roleSizes returns every role of the job and its number of ranks, in
// rank order (the chief, the workers, the parameter servers).
func roleSizes(peers []*driverpb.Peer) []roleSize {
	var out []roleSize
	for _, p := range peers {
		role, _ := peerRole(p)
		if len(out) > 0 && out[len(out)-1].role == role {
			out[len(out)-1].n++
			continue
		}
		out = append(out, roleSize{role: role, n: 1})
	}
	return out
}

// roleEnv sets the role variables: SPINDLE_ROLE, SPINDLE_ROLE_RANK,
// SPINDLE_ROLE_WORLD_SIZE (ranks of this role) and SPINDLE_ROLES (every
// role and its size, as in chief:1,worker:2,ps:1).
func roleEnv(set func(string, any), id identity) {
	role, roleRank := peerRole(id.peers[id.rank])
	set(envcontract.Role, role)
	set(envcontract.RoleRank, roleRank)
	sizes := roleSizes(id.peers)
	parts := make([]string, len(sizes))
	for i, s := range sizes {
		parts[i] = s.role + ":" + strconv.Itoa(s.n)
		if s.role == role {
			set(envcontract.RoleWorldSize, s.n)
		}
	}
	set(envcontract.Roles, strings.Join(parts, ","))
}

// feeds says whether this rank's role gets a share of the input.
func (id identity) feeds() bool {
	role, _ := peerRole(id.peers[id.rank])
	return role == roleWorker
}

// feedRank returns this rank's share of the feed and the number of
// shares: its rank among the workers, and the number of workers.
func (id identity) feedRank() (rank, size int) {
	_, rank = peerRole(id.peers[id.rank])
	for _, s := range roleSizes(id.peers) {
		if s.role == roleWorker {
			size = s.n
		}
	}
	return rank, size
}

// tfTask is TF_CONFIG's task.
type tfTask struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// tfConfigFor renders TF_CONFIG for the rank among peers, whose service
// addresses (TensorFlow's gRPC servers) are addrs. A job of workers only
// keeps the convention of a job without roles: rank 0 is the chief, the
// others are workers 0..N-2. A job with roles lists every role under its
// own name (chief, worker, ps), each in role-rank order, and the task is
// the rank's role and rank within it.
func tfConfigFor(peers []*driverpb.Peer, addrs []string, rank int) (string, error) {
	if sizes := roleSizes(peers); len(sizes) == 1 && sizes[0].role == roleWorker {
		return tfConfig(addrs, rank)
	}
	cluster := map[string][]string{}
	for _, s := range roleSizes(peers) {
		cluster[s.role] = make([]string, s.n)
	}
	for i, p := range peers {
		role, rr := peerRole(p)
		if rr < 0 || rr >= len(cluster[role]) || cluster[role][rr] != "" {
			return "", fmt.Errorf("rank %d has %s rank %d, which the published cluster spec does not allow", i, role, rr)
		}
		cluster[role][rr] = addrs[i]
	}
	role, rr := peerRole(peers[rank])
	b, err := json.Marshal(struct {
		Cluster map[string][]string `json:"cluster"`
		Task    tfTask              `json:"task"`
	}{cluster, tfTask{Type: role, Index: rr}})
	if err != nil {
		return "", fmt.Errorf("encode TF_CONFIG: %w", err)
	}
	return string(b), nil
}

// outputPrefix is put before each line of the training process's output:
// "[rank 1] " in a job of workers only, else the role and rank within it,
// as in "[ps 0] " or "[chief] ".
func outputPrefix(id identity) string {
	if sizes := roleSizes(id.peers); len(sizes) == 1 && sizes[0].role == roleWorker {
		return fmt.Sprintf("[rank %d] ", id.rank)
	}
	role, rr := peerRole(id.peers[id.rank])
	if role == roleChief {
		return "[chief] "
	}
	return fmt.Sprintf("[%s %d] ", role, rr)
}
