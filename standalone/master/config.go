package master

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/spindle-ml/spindle/standalone/internal/secure"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("master: invalid configuration")

// Peer is one master of the Raft group.
type Peer struct {
	// ID names the master (spindle master --id).
	ID string
	// RaftAddr is the host:port other masters reach its Raft transport at.
	RaftAddr string
	// Addr is the host:port of its gRPC API.
	Addr string
}

// ParsePeers parses "m1=10.0.0.1:7001@10.0.0.1:7077,m2=..." (id=raft@grpc).
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, rest, ok := strings.Cut(item, "=")
		raftAddr, addr, ok2 := strings.Cut(rest, "@")
		if !ok || !ok2 || id == "" || raftAddr == "" || addr == "" {
			return nil, fmt.Errorf("%w: peer %q: want id=raft-host:port@grpc-host:port", ErrConfig, item)
		}
		for _, a := range []string{raftAddr, addr} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("%w: peer %q: address %q: %v", ErrConfig, item, a, err)
			}
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: peer id %q given twice", ErrConfig, id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, RaftAddr: raftAddr, Addr: addr})
	}
	return out, nil
}

// Config configures one master.
type Config struct {
	// ID names this master; it must be one of Peers.
	ID string
	// Addr is where the gRPC API listens (host:port).
	Addr string
	// RaftAddr is where the Raft transport listens (host:port). Bind it to
	// a private or loopback address: it is authenticated with the cluster
	// secret but not encrypted unless TLS files are configured.
	RaftAddr string
	// Peers are all masters of the group, this one included. Empty means a
	// group of one, advertised at Addr and RaftAddr.
	Peers []Peer
	// DataDir holds the Raft log, stable store and snapshots. A master
	// restarted on the same directory keeps the cluster state.
	DataDir string

	// Secret is the cluster secret shared by masters, workers and drivers.
	Secret string
	// TLS optionally enables mutual TLS on gRPC and Raft connections.
	TLS secure.TLSFiles

	// Raft timing. Small values fail over faster and cost more traffic.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// Snapshots: taken every SnapshotInterval when SnapshotThreshold
	// entries were added; TrailingLogs entries are kept after one;
	// SnapshotRetain snapshot files are kept on disk.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotRetain    int

	// WorkerTimeout: a worker silent this long is lost, with its executors.
	WorkerTimeout time.Duration
	// WorkerGoneTimeout: a worker whose connection from the leader closed,
	// that refuses new ones and that has not heartbeated for this long is
	// lost at once (its process died), without waiting out WorkerTimeout;
	// 0 turns this off.
	WorkerGoneTimeout time.Duration
	// AppTimeout: an application whose driver is silent this long is
	// ended and its executors stopped.
	AppTimeout time.Duration
	// LaunchTimeout bounds one executor launch on a worker.
	LaunchTimeout time.Duration
	// PlaintextSecrets lets launches carry a job's secrets to workers on
	// other hosts without TLS (spindle.cluster.plaintextSecrets).
	PlaintextSecrets bool
	// StopGrace is the time executors get between SIGTERM and SIGKILL.
	StopGrace time.Duration
	// GangTimeout is how long a gang waits for room when the request does
	// not say.
	GangTimeout time.Duration
	// ProbeTimeout bounds asking a registered worker whether it still
	// runs, when another process registers under its id (zero:
	// DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// RaftHandshakeTimeout bounds the authentication of a connection
	// between masters' Raft transports (zero: DefaultRaftHandshakeTimeout);
	// RaftIOTimeout each of the transport's reads and writes (zero:
	// DefaultRaftIOTimeout).
	RaftHandshakeTimeout, RaftIOTimeout time.Duration

	// Placement is PlacementSpread or PlacementPack.
	Placement string
	// MaxExecutorsPerApp and MaxCoresPerApp cap one application (0: no cap).
	MaxExecutorsPerApp int
	MaxCoresPerApp     int
	// RetainedApps is how many ended applications the state remembers.
	RetainedApps int

	Logger *slog.Logger

	// Listeners already bound (tests); nil binds Addr and RaftAddr.
	Listener     net.Listener
	RaftListener net.Listener

	// transport replaces the network transport (in-memory tests).
	transport raft.Transport
}

// Defaults of the bounds Config holds but the config package's key table
// does not: zero fields take them.
const (
	DefaultProbeTimeout         = 2 * time.Second
	DefaultRaftHandshakeTimeout = 5 * time.Second
	DefaultRaftIOTimeout        = 10 * time.Second
)

// DefaultConfig returns the defaults, the same as the config package's
// key table.
func DefaultConfig() Config {
	return Config{
		Addr:                 "0.0.0.0:7077",
		RaftAddr:             "127.0.0.1:7001",
		HeartbeatTimeout:     150 * time.Millisecond,
		ElectionTimeout:      150 * time.Millisecond,
		LeaderLeaseTimeout:   150 * time.Millisecond,
		CommitTimeout:        50 * time.Millisecond,
		SnapshotInterval:     30 * time.Second,
		SnapshotThreshold:    2048,
		TrailingLogs:         1024,
		SnapshotRetain:       2,
		WorkerTimeout:        5 * time.Second,
		WorkerGoneTimeout:    2 * time.Second,
		AppTimeout:           30 * time.Second,
		LaunchTimeout:        30 * time.Second,
		StopGrace:            5 * time.Second,
		GangTimeout:          2 * time.Minute,
		ProbeTimeout:         DefaultProbeTimeout,
		RaftHandshakeTimeout: DefaultRaftHandshakeTimeout,
		RaftIOTimeout:        DefaultRaftIOTimeout,
		Placement:            PlacementSpread,
		RetainedApps:         200,
	}
}

// Validate checks the configuration and fills in a one-master group when
// Peers is empty.
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	if c.ID == "" {
		return bad("no master id (--id)")
	}
	if c.DataDir == "" {
		return bad("no data directory (--data-dir or spindle.master.dataDir)")
	}
	if len(c.Peers) == 0 {
		c.Peers = []Peer{{ID: c.ID, RaftAddr: c.RaftAddr, Addr: c.Addr}}
	}
	self := false
	for _, p := range c.Peers {
		if p.ID == c.ID {
			self = true
		}
	}
	if !self {
		return bad("master id %q is not among the peers (--peers)", c.ID)
	}
	if c.HeartbeatTimeout < 5*time.Millisecond || c.ElectionTimeout < 5*time.Millisecond {
		return bad("raft heartbeat timeout %s and election timeout %s must be at least 5ms", c.HeartbeatTimeout, c.ElectionTimeout)
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return bad("raft election timeout %s is shorter than the heartbeat timeout %s; raise spindle.master.raft.electionTimeout with spindle.master.raft.heartbeatTimeout",
			c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout <= 0 || c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return bad("raft leader lease timeout %s must be positive and at most the heartbeat timeout %s", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.CommitTimeout <= 0 {
		return bad("raft commit timeout %s must be positive", c.CommitTimeout)
	}
	if c.WorkerTimeout <= 0 || c.AppTimeout <= 0 || c.LaunchTimeout <= 0 || c.GangTimeout <= 0 {
		return bad("worker timeout %s, app timeout %s, launch timeout %s and gang timeout %s must be positive",
			c.WorkerTimeout, c.AppTimeout, c.LaunchTimeout, c.GangTimeout)
	}
	if c.WorkerGoneTimeout < 0 {
		return bad("worker gone timeout %s must not be negative (0 turns it off)", c.WorkerGoneTimeout)
	}
	switch c.Placement {
	case PlacementSpread, PlacementPack:
	default:
		return bad("placement %q: want %s or %s (spindle.standalone.placement)", c.Placement, PlacementSpread, PlacementPack)
	}
	if c.SnapshotRetain < 1 {
		c.SnapshotRetain = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// self returns this master's peer entry.
func (c *Config) self() Peer {
	for _, p := range c.Peers {
		if p.ID == c.ID {
			return p
		}
	}
	return Peer{}
}
