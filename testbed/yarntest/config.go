package yarntest

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// NodeConfig sizes one NodeManager.
type NodeConfig struct {
	// MemoryMB, VCores and GPUs are what the node offers containers.
	MemoryMB int
	VCores   int
	GPUs     int
	// Host is the loopback address the NodeManager binds to, its host
	// in YARN's eyes; empty means Config.Host. NodeManagers on distinct
	// addresses (127.0.0.2, ...) are distinct hosts to locality and to
	// an application's blacklist.
	Host string
}

// QueueConfig is one scheduler queue. A zero MemoryMB or VCores means no
// limit beyond the cluster's own size.
type QueueConfig struct {
	Name     string
	MemoryMB int
	VCores   int
}

// Config configures a test YARN.
type Config struct {
	// Dir holds the NodeManagers' local and log directories.
	Dir string
	// Nodes sizes each NodeManager; empty means NodeManagers nodes of
	// NodeMemoryMB and NodeVCores.
	Nodes []NodeConfig
	// NodeManagers, NodeMemoryMB and NodeVCores describe identical nodes
	// when Nodes is empty.
	NodeManagers int
	NodeMemoryMB int
	NodeVCores   int
	// Queues are the scheduler's queues; "default" is always there.
	Queues []QueueConfig
	// MaxAllocationMB is yarn.scheduler.maximum-allocation-mb: the
	// largest container; zero means the largest node's memory.
	MaxAllocationMB int
	// Host is the IP address every server binds to.
	Host string
	// RMPort and SchedulerPort fix the ResourceManager's client and
	// scheduler ports (zero: any free port).
	RMPort, SchedulerPort int
	// HadoopConfDir is given to containers as HADOOP_CONF_DIR and used to
	// localize hdfs:// resources (the test HDFS's configuration).
	HadoopConfDir string
	// KillGrace is how long a stopped container has between SIGTERM and
	// SIGKILL (YARN's sleep-delay-before-sigkill); zero means 250ms.
	KillGrace time.Duration
	// FinishGrace is how long an ApplicationMaster may run after it
	// unregistered before it is killed; zero means 30s.
	FinishGrace time.Duration
	// RPCProtection is hadoop.rpc.protection for the token connections of
	// ApplicationMasters: the scheduler port (AMRMTokens) and the
	// NodeManagers (NMTokens) offer these levels; empty means
	// authentication.
	RPCProtection string
	// Logger receives the cluster's logs; nil discards them.
	Logger *slog.Logger
	// ClientSASL, when set, authenticates the ResourceManager's client
	// port (a hadooprpc.KerberosServer for a Kerberized cluster), and
	// Principal, when set, is written as yarn.resourcemanager.principal.
	// The ResourceManager does not renew the applications' delegation
	// tokens, as YARN's does: a token in a launch context lives until its
	// first renewal deadline. With ClientSASL, NodeManagers localize a
	// container's hdfs:// resources with the delegation tokens of its
	// launch context, as a secure NodeManager does.
	ClientSASL hadooprpc.SASL
	Principal  string
	// Launcher, when set, runs every container in this process instead
	// of as a process (simulated nodes: no files are localized, no
	// launch script written); StartLatency is each container's time from
	// startContainers to its launch.
	Launcher     Launcher
	StartLatency time.Duration
	// GrantsPerNode, when positive, is how many containers each node
	// grants an application per allocate call, as a scheduler that
	// assigns containers on node heartbeats does: a large gang is granted
	// over several allocate round trips.
	GrantsPerNode int
	// NodeHeartbeat, when positive, makes the ResourceManager grant as
	// YARN's does: only on a NodeManager's heartbeat, each node beating
	// once per NodeHeartbeat with the nodes' phases spread over it, when
	// the node takes what it fits of the outstanding asks (at most
	// GrantsPerNode of them when that is positive); an allocate call
	// hands out what the nodes granted since the last one. Zero: every
	// allocate call grants at once.
	NodeHeartbeat time.Duration
	// DropEnv are variables of this process's environment that
	// containers do not inherit: a node without them (KRB5_CONFIG, for
	// nodes whose krb5.conf does not know the test realm).
	DropEnv []string
}

// DefaultConfig returns the defaults: three NodeManagers of 8 GiB and 8
// vcores on loopback, and an unlimited default queue.
func DefaultConfig() Config {
	return Config{NodeManagers: 3, NodeMemoryMB: 8192, NodeVCores: 8, Host: "127.0.0.1",
		KillGrace: 250 * time.Millisecond, FinishGrace: 30 * time.Second}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.NodeManagers == 0 {
		c.NodeManagers = d.NodeManagers
	}
	if c.NodeMemoryMB == 0 {
		c.NodeMemoryMB = d.NodeMemoryMB
	}
	if c.NodeVCores == 0 {
		c.NodeVCores = d.NodeVCores
	}
	if len(c.Nodes) == 0 {
		for i := 0; i < c.NodeManagers; i++ {
			c.Nodes = append(c.Nodes, NodeConfig{MemoryMB: c.NodeMemoryMB, VCores: c.NodeVCores})
		}
	}
	if c.Host == "" {
		c.Host = d.Host
	}
	if c.KillGrace == 0 {
		c.KillGrace = d.KillGrace
	}
	if c.FinishGrace == 0 {
		c.FinishGrace = d.FinishGrace
	}
	if c.MaxAllocationMB == 0 {
		for _, n := range c.Nodes {
			c.MaxAllocationMB = max(c.MaxAllocationMB, n.MemoryMB)
		}
	}
	hasDefault := false
	for _, q := range c.Queues {
		hasDefault = hasDefault || q.Name == "default"
	}
	if !hasDefault {
		c.Queues = append([]QueueConfig{{Name: "default"}}, c.Queues...)
	}
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("yarntest: Config.Dir is required")
	case len(c.Nodes) == 0:
		return errors.New("yarntest: no NodeManagers")
	case net.ParseIP(c.Host) == nil:
		return fmt.Errorf("yarntest: Host %q is not an IP address", c.Host)
	}
	for i, n := range c.Nodes {
		if n.MemoryMB <= 0 || n.VCores <= 0 || n.GPUs < 0 {
			return fmt.Errorf("yarntest: node %d has %d MiB, %d vcores, %d GPUs: want positive memory and vcores", i, n.MemoryMB, n.VCores, n.GPUs)
		}
		if n.Host != "" && net.ParseIP(n.Host) == nil {
			return fmt.Errorf("yarntest: node %d: Host %q is not an IP address", i, n.Host)
		}
	}
	seen := map[string]bool{}
	for _, q := range c.Queues {
		if q.Name == "" || seen[q.Name] {
			return fmt.Errorf("yarntest: queue name %q is empty or repeated", q.Name)
		}
		seen[q.Name] = true
		if q.MemoryMB < 0 || q.VCores < 0 {
			return fmt.Errorf("yarntest: queue %s has a negative limit", q.Name)
		}
	}
	return nil
}
