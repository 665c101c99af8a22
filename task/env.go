package task

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/internal/envcontract"
)

// The environment variables an executor sets for its training process.
const (
	EnvRank              = envcontract.Rank
	EnvWorldSize         = envcontract.WorldSize
	EnvLocalRank         = envcontract.LocalRank
	EnvLocalWorldSize    = envcontract.LocalWorldSize
	EnvJobID             = envcontract.JobID
	EnvFeed              = envcontract.Feed
	EnvFeedMode          = envcontract.FeedMode
	EnvCheckpointDir     = envcontract.CheckpointDir
	EnvPeers             = envcontract.Peers
	EnvPeerListenFD      = envcontract.PeerListenFD
	EnvCollectiveTimeout = envcontract.CollectiveTimeout
	EnvRole              = envcontract.Role
	EnvRoleRank          = envcontract.RoleRank
	EnvRoleWorldSize     = envcontract.RoleWorldSize
	EnvRoles             = envcontract.Roles
	EnvPeerToken         = envcontract.PeerToken
)

// Sentinel errors of the package.
var (
	// ErrNotSpindle is returned by FromEnv when the program was not started
	// by a Spindle executor, so that a program can fall back to running
	// alone.
	ErrNotSpindle = errors.New("task: not started by spindle")
	// ErrBadEnv is wrapped by every error about a malformed variable.
	ErrBadEnv = errors.New("task: bad environment")
	// ErrNoFeed is returned when the job has no feed of the kind asked for.
	ErrNoFeed = errors.New("task: no such feed")
)

// Env is a training process's view of its job, read from the environment.
type Env struct {
	// Rank is this process's rank, 0 ≤ Rank < WorldSize.
	Rank int
	// WorldSize is the number of ranks in the job.
	WorldSize int
	// LocalRank and LocalWorldSize number the ranks on this host.
	LocalRank      int
	LocalWorldSize int
	// Role is this process's role: "worker", "chief" or "ps" (every rank
	// of a job without roles is a worker). Only workers are fed.
	Role string
	// RoleRank and RoleWorldSize number the ranks of this role.
	RoleRank      int
	RoleWorldSize int
	// Roles are the job's roles and their sizes, in rank order (one
	// worker role covering every rank in a job without roles).
	Roles []RoleSize
	// PeerToken authenticates the connections between ranks (Spindle's
	// collectives and parameter server); empty when the job has none.
	PeerToken string
	// JobID names the job.
	JobID string
	// Feed is the socket (arrow and tensor modes) or the JSON file (direct
	// mode) of the feed; empty when the job has no input.
	Feed string
	// FeedMode is how the feed works; empty when the job has no input.
	FeedMode wire.Mode
	// CheckpointDir is where to keep checkpoints (a local path or a URI);
	// empty when the job has none.
	CheckpointDir string
	// CheckpointKeep is how many complete checkpoints of a prefix a
	// Checkpointer keeps (spindle.checkpoint.keep, SPINDLE_CHECKPOINT_KEEP;
	// DefaultCheckpointKeep when unset); 0 keeps every one.
	CheckpointKeep int
	// Peers holds every rank's host:port for the collectives library, in
	// rank order; nil when the job did not publish them.
	Peers []string
	// PeerListenFD is an inherited file descriptor holding this rank's
	// already-bound peer listener, or -1. Use PeerListener.
	PeerListenFD int
	// CollectiveTimeout is how long a collective waits for a silent peer
	// before failing; zero when unset.
	CollectiveTimeout time.Duration
	// DataLink is the job's data link (SPINDLE_COLLECTIVE_LINK, which the
	// executor sets from spindle.rdma.mode): the collectives' and the
	// parameter-server client's. Empty means TCP (gRPC for the client).
	DataLink string
	// Generation counts the job's restarts: 0 for the first gang.
	Generation int
	// Replacement is 0, or k in the kth process started alone to replace
	// this rank's lost one while the other ranks kept running.
	Replacement int
	// MembershipFile is where the executor keeps the gang's collective
	// membership (SPINDLE_MEMBERSHIP), rewritten when a lost rank is
	// replaced alone while this process runs; empty from an executor
	// that predates it. See Env.Rejoin.
	MembershipFile string
	// ResumeCheckpoint and ResumeStep name the checkpoint this generation
	// resumes from (Checkpointer.Resume loads it); empty when there is
	// none.
	ResumeCheckpoint string
	ResumeStep       int64
	// FeedStartEpoch and FeedStartBatch are where the feed starts when
	// resuming: its first epoch, and the batches of it already consumed.
	FeedStartEpoch int
	FeedStartBatch int64
}

// FromEnv reads the environment the executor set. Errors name the variable
// and what is wrong with it; when SPINDLE_RANK is not set at all the error
// wraps ErrNotSpindle.
func FromEnv() (Env, error) {
	return fromLookup(os.LookupEnv)
}

// fromLookup is FromEnv over any variable lookup, for tests.
func fromLookup(lookup func(string) (string, bool)) (Env, error) {
	e := Env{PeerListenFD: -1}
	if _, ok := lookup(EnvRank); !ok {
		return Env{}, fmt.Errorf("%w: %s is not set; run the program with spindle submit", ErrNotSpindle, EnvRank)
	}
	var err error
	integer := func(name string, min int, dst *int) {
		if err != nil {
			return
		}
		v, ok := lookup(name)
		if !ok {
			err = fmt.Errorf("%w: %s is not set", ErrBadEnv, name)
			return
		}
		n, perr := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case perr != nil:
			err = fmt.Errorf("%w: %s=%s: not an integer", ErrBadEnv, name, v)
		case n < min:
			err = fmt.Errorf("%w: %s=%d: must be at least %d", ErrBadEnv, name, n, min)
		default:
			*dst = n
		}
	}
	integer(EnvRank, 0, &e.Rank)
	integer(EnvWorldSize, 1, &e.WorldSize)
	integer(EnvLocalRank, 0, &e.LocalRank)
	integer(EnvLocalWorldSize, 1, &e.LocalWorldSize)
	if err != nil {
		return Env{}, err
	}
	if e.Rank >= e.WorldSize {
		return Env{}, fmt.Errorf("%w: %s=%d is not below %s=%d", ErrBadEnv, EnvRank, e.Rank, EnvWorldSize, e.WorldSize)
	}
	if e.LocalRank >= e.LocalWorldSize {
		return Env{}, fmt.Errorf("%w: %s=%d is not below %s=%d", ErrBadEnv, EnvLocalRank, e.LocalRank, EnvLocalWorldSize, e.LocalWorldSize)
	}
	// Executors that predate roles set none: every rank is then a worker.
	e.Role, e.RoleRank, e.RoleWorldSize = envcontract.RoleWorker, e.Rank, e.WorldSize
	if v, ok := lookup(EnvRole); ok && v != "" {
		e.Role = strings.TrimSpace(v)
		integer(EnvRoleRank, 0, &e.RoleRank)
		integer(EnvRoleWorldSize, 1, &e.RoleWorldSize)
		if err != nil {
			return Env{}, err
		}
		if e.RoleRank >= e.RoleWorldSize {
			return Env{}, fmt.Errorf("%w: %s=%d is not below %s=%d", ErrBadEnv, EnvRoleRank, e.RoleRank, EnvRoleWorldSize, e.RoleWorldSize)
		}
	}
	e.Roles = []RoleSize{{Role: envcontract.RoleWorker, Size: e.WorldSize}}
	if v, ok := lookup(EnvRoles); ok && v != "" {
		roles, rerr := parseRoles(v, e.WorldSize)
		if rerr != nil {
			return Env{}, rerr
		}
		e.Roles = roles
	}
	e.PeerToken, _ = lookup(EnvPeerToken)
	e.JobID, _ = lookup(EnvJobID)
	e.CheckpointDir, _ = lookup(EnvCheckpointDir)
	e.DataLink, _ = lookup(envcontract.CollectiveLink)
	e.MembershipFile, _ = lookup(envcontract.Membership)

	if err := feedFromLookup(lookup, &e); err != nil {
		return Env{}, err
	}
	if err := peersFromLookup(lookup, &e); err != nil {
		return Env{}, err
	}
	if err := resumeFromLookup(lookup, &e); err != nil {
		return Env{}, err
	}
	return e, nil
}

// feedFromLookup reads the feed's socket or file and its mode into e.
func feedFromLookup(lookup func(string) (string, bool), e *Env) error {
	e.Feed, _ = lookup(EnvFeed)
	mode, _ := lookup(EnvFeedMode)
	switch {
	case mode == envcontract.FeedNone && e.Feed == "":
		// A role that gets no share of the input: no feed.
	case mode != "":
		m, err := wire.ParseMode(mode)
		if err != nil {
			return fmt.Errorf("%w: %s=%s: want arrow, tensor or direct", ErrBadEnv, EnvFeedMode, mode)
		}
		e.FeedMode = m
		if e.Feed == "" {
			return fmt.Errorf("%w: %s=%s but %s is not set", ErrBadEnv, EnvFeedMode, mode, EnvFeed)
		}
	case e.Feed != "":
		return fmt.Errorf("%w: %s is set but %s is not", ErrBadEnv, EnvFeed, EnvFeedMode)
	}
	return nil
}

// peersFromLookup reads the ranks' peer addresses, this rank's inherited
// peer listener and the collectives' timeout into e.
func peersFromLookup(lookup func(string) (string, bool), e *Env) error {
	v, from, err := envcontract.LookupPeers(lookup)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadEnv, err)
	}
	if v != "" {
		e.Peers = strings.Split(v, ",")
		if len(e.Peers) != e.WorldSize {
			return fmt.Errorf("%w: %s lists %d peers for %s=%d", ErrBadEnv, from, len(e.Peers), EnvWorldSize, e.WorldSize)
		}
		for i, p := range e.Peers {
			host, port, err := net.SplitHostPort(strings.TrimSpace(p))
			if err != nil || host == "" {
				return fmt.Errorf("%w: %s: peer %d is %q, want host:port", ErrBadEnv, from, i, p)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("%w: %s: peer %d has port %q, want 1-65535", ErrBadEnv, from, i, port)
			}
			e.Peers[i] = strings.TrimSpace(p)
		}
	}
	if v, ok := lookup(EnvPeerListenFD); ok && v != "" {
		fd, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || fd < 0 {
			return fmt.Errorf("%w: %s=%s: not a file descriptor number", ErrBadEnv, EnvPeerListenFD, v)
		}
		e.PeerListenFD = fd
	}
	if v, ok := lookup(EnvCollectiveTimeout); ok && v != "" {
		secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(secs > 0) || secs > math.MaxInt64/float64(time.Second) {
			return fmt.Errorf("%w: %s=%s: want a positive number of seconds", ErrBadEnv, EnvCollectiveTimeout, v)
		}
		e.CollectiveTimeout = time.Duration(secs * float64(time.Second))
	}
	return nil
}

// resumeFromLookup reads the generation and where it resumes.
func resumeFromLookup(lookup func(string) (string, bool), e *Env) error {
	nonNegative := func(name string) (int64, error) {
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: %s=%s: want a whole number, 0 or more", ErrBadEnv, name, v)
		}
		return n, nil
	}
	gen, err := nonNegative(envcontract.Generation)
	if err != nil {
		return err
	}
	e.Generation = int(gen)
	repl, err := nonNegative(envcontract.Replacement)
	if err != nil {
		return err
	}
	e.Replacement = int(repl)
	e.CheckpointKeep = DefaultCheckpointKeep
	if v, ok := lookup(envcontract.CheckpointKeep); ok && strings.TrimSpace(v) != "" {
		keep, err := nonNegative(envcontract.CheckpointKeep)
		if err != nil {
			return err
		}
		e.CheckpointKeep = int(keep)
	}
	e.ResumeCheckpoint, _ = lookup(envcontract.ResumeCheckpoint)
	if e.ResumeStep, err = nonNegative(envcontract.ResumeStep); err != nil {
		return err
	}
	epoch, err := nonNegative(envcontract.FeedStartEpoch)
	if err != nil {
		return err
	}
	e.FeedStartEpoch = int(epoch)
	e.FeedStartBatch, err = nonNegative(envcontract.FeedStartBatch)
	return err
}

// RoleSize is one role of a job and its number of ranks.
type RoleSize struct {
	Role string
	Size int
}

// parseRoles reads SPINDLE_ROLES (chief:1,worker:2,ps:1), whose sizes
// add up to the world size.
func parseRoles(v string, worldSize int) ([]RoleSize, error) {
	var out []RoleSize
	total := 0
	for _, part := range strings.Split(v, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(part), ":")
		size, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || size < 1 {
			return nil, fmt.Errorf("%w: %s=%s: %q is not role:count", ErrBadEnv, EnvRoles, v, part)
		}
		out = append(out, RoleSize{Role: name, Size: size})
		total += size
	}
	if total != worldSize {
		return nil, fmt.Errorf("%w: %s=%s counts %d ranks for %s=%d", ErrBadEnv, EnvRoles, v, total, EnvWorldSize, worldSize)
	}
	return out, nil
}

// RoleRanks returns the first rank of role and its number of ranks (0
// when the job has none): ranks are numbered role after role.
func (e Env) RoleRanks(role string) (first, n int) {
	for _, r := range e.Roles {
		if r.Role == role {
			return first, r.Size
		}
		first += r.Size
	}
	return 0, 0
}

// PeerListener returns the listener the executor bound for this rank's
// peer port and passed down as SPINDLE_PEER_LISTEN_FD, so that no other
// process can take the port between the driver publishing it and this
// process listening. It takes the descriptor over: call it once.
func (e Env) PeerListener() (net.Listener, error) {
	if e.PeerListenFD < 0 {
		return nil, fmt.Errorf("%w: %s is not set; bind your peer port yourself", ErrBadEnv, EnvPeerListenFD)
	}
	f := os.NewFile(uintptr(e.PeerListenFD), "spindle-peer-listener")
	if f == nil {
		return nil, fmt.Errorf("%w: %s=%d: not an open file descriptor", ErrBadEnv, EnvPeerListenFD, e.PeerListenFD)
	}
	defer f.Close() // FileListener holds a duplicate
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("use peer listener %s=%d: %w", EnvPeerListenFD, e.PeerListenFD, err)
	}
	return ln, nil
}
