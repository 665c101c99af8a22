package driver

import (
	"fmt"
	"strings"

	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/internal/envcontract"
)

// Role is what an executor does in its job.
type Role string

// The roles of a job, in rank order: a job's ranks are its chief (when it
// has one), then its workers, then its parameter servers.
const (
	// RoleChief coordinates the job (TensorFlow's chief); the job ends
	// when it does.
	RoleChief Role = envcontract.RoleChief
	// RoleWorker trains on its share of the input; only workers are fed.
	// Without a chief, the job ends when every worker has.
	RoleWorker Role = envcontract.RoleWorker
	// RolePS is a parameter server: it never ends on its own, so it is
	// stopped when the job ends, and fails the job if it fails before.
	RolePS Role = envcontract.RolePS
)

// Feeds says whether executors of the role get a share of the input:
// workers do ("" is a worker, as on the wire), the other roles do not.
func (r Role) Feeds() bool { return r == RoleWorker || r == "" }

// RoleSpec is one role of a job: how many executors and what each gets.
type RoleSpec struct {
	Role     Role
	Count    int
	Cores    int
	MemoryMB int
	GPUs     int
	// Command replaces the job's training command for this role; empty
	// runs the job's command.
	Command []string
	// Builtin runs Spindle's own parameter server (spindle ps serve) in
	// place of a command: a ps role without --ps-command.
	Builtin bool
}

// Roles returns the job's roles in rank order, leaving out those with no
// executors: the chief (spindle.chief.enabled), the workers (the
// executors), then the parameter servers (spindle.ps.*).
func (c *Config) Roles() []RoleSpec {
	var out []RoleSpec
	if c.Chief {
		out = append(out, RoleSpec{Role: RoleChief, Count: 1, Cores: c.Cores, MemoryMB: c.MemoryMB, GPUs: c.GPUs})
	}
	out = append(out, RoleSpec{Role: RoleWorker, Count: c.NumExecutors, Cores: c.Cores, MemoryMB: c.MemoryMB, GPUs: c.GPUs})
	if c.PS.Count > 0 {
		ps := c.PS
		ps.Role = RolePS
		out = append(out, ps)
	}
	return out
}

// SharedFeedMB is the most an executor of the role adds to its own and
// its training process's resident sizes, taken together, by feeding
// through shared memory (spindle.feed.sharedMemory; see
// wire.SharedResidentBytes), in MiB: zero for roles that are not fed,
// for jobs without input and with shared memory off.
func (c *Config) SharedFeedMB(r Role) int {
	if !r.Feeds() || !c.SharedMemory || len(c.Inputs) == 0 {
		return 0
	}
	return int((wire.SharedResidentBytes(wire.Mode(c.FeedMode), c.MemoryBudget) + 1<<20 - 1) >> 20)
}

// TotalGPUs returns the GPUs the job's executors ask for together: every
// role's count times its GPUs per executor.
func (c *Config) TotalGPUs() int {
	n := 0
	for _, r := range c.Roles() {
		n += r.Count * r.GPUs
	}
	return n
}

// slot is one executor's place in its job.
type slot struct {
	id       string
	rank     int
	role     Role
	roleRank int
	spec     RoleSpec
}

// layout numbers the executors of roles: ranks in role order, executor
// ids exec-<rank>.
func layout(roles []RoleSpec) []slot {
	var out []slot
	for _, r := range roles {
		for i := 0; i < r.Count; i++ {
			rank := len(out)
			out = append(out, slot{id: fmt.Sprintf("exec-%d", rank), rank: rank, role: r.Role, roleRank: i, spec: r})
		}
	}
	return out
}

// workerSlots lays ids out as workers, rank i to ids[i].
func workerSlots(ids []string) []slot {
	out := make([]slot, len(ids))
	for i, id := range ids {
		out[i] = slot{id: id, rank: i, role: RoleWorker, roleRank: i}
	}
	return out
}

// roleCounts renders how many executors each role has, as in
// "chief=1 worker=2 ps=1".
func roleCounts(roles []RoleSpec) string {
	parts := make([]string, 0, len(roles))
	for _, r := range roles {
		parts = append(parts, fmt.Sprintf("%s=%d", r.Role, r.Count))
	}
	return strings.Join(parts, " ")
}

// SplitCommand splits a command line into words as a POSIX shell would
// split it: on blanks, with single quotes, double quotes and backslashes
// quoting. It expands nothing (no variables, globs or ~).
func SplitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("command %q: unterminated single quote", s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				// In double quotes a backslash quotes only these.
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("command %q: unterminated double quote", s)
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("command %q: ends with a backslash", s)
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
