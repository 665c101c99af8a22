package collective

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// Environment variables read by FromEnv. The Spindle executor sets them for
// every training process.
const (
	EnvRank        = envcontract.Rank
	EnvWorldSize   = envcontract.WorldSize
	EnvPeers       = envcontract.Peers
	EnvPeerFD      = envcontract.PeerListenFD
	EnvJobID       = envcontract.JobID
	EnvTimeoutSecs = envcontract.CollectiveTimeout
	EnvPeerToken   = envcontract.PeerToken
	// EnvLink selects the data link (see ParseLinkSpec); the executor sets
	// it from spindle.rdma.mode and the rank's RDMA devices.
	EnvLink = envcontract.CollectiveLink
	// EnvIncarnations gives every rank's incarnation (Config.Incarnations)
	// comma-separated: a process started to replace a lost one joins with
	// its rank's next incarnation.
	EnvIncarnations = envcontract.Incarnations
)

// Defaults applied by New to zero fields of Config.
const (
	DefaultTimeout        = envcontract.DefaultCollectiveTimeout
	DefaultConnectTimeout = 2 * time.Minute
	// DefaultHandshakeTimeout bounds an accepted connection's hello; real
	// peers send it at once.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultNoticeTimeout bounds delivering one failure notice.
	DefaultNoticeTimeout = 2 * time.Second
	// DefaultProbeTimeout bounds asking a silent peer what it is blocked
	// on: a live process answers from its accept loop at once, even while
	// its operation waits; a stopped one does not answer at all.
	DefaultProbeTimeout      = time.Second
	DefaultChunkBytes        = 1 << 20
	DefaultSocketBufferBytes = 4 << 20
)

// Config describes one rank of a communicator.
type Config struct {
	// Rank is this process's rank, in [0, WorldSize).
	Rank int
	// WorldSize is the number of ranks.
	WorldSize int
	// Peers holds every rank's peer address (host:port) in rank order.
	// Peers[Rank] is where this rank listens.
	Peers []string
	// Incarnations holds, in rank order, which incarnation of each rank
	// this one expects: the number of times the rank's process has been
	// replaced. Every connection's handshake carries both ends'
	// incarnations, so a replaced process that is still alive cannot
	// rejoin (it gets ErrReplaced) while its replacement, on a new
	// address, can (see Comm.Rejoin). Nil means zero for every rank.
	Incarnations []uint32
	// Listener, when set, is an already-bound listener on this rank's peer
	// port (typically inherited from the executor). New takes ownership of
	// it: Close closes it. When nil, New binds Peers[Rank] itself.
	Listener net.Listener
	// JobID is checked in the connection handshake, so processes of
	// different jobs never talk to each other by accident.
	JobID string
	// Token, when set, authenticates every connection between ranks:
	// each side proves it holds the token (an HMAC over the handshake, with
	// a timestamp and a nonce against replay), so a process outside the job
	// can neither join the ring nor abort it. Every rank of a job must hold
	// the same token, of at least 16 bytes; the executor derives one per
	// job (SPINDLE_PEER_TOKEN). Empty leaves connections checked by the job
	// id only, for tests and trusted networks. The token never appears in
	// errors or logs.
	Token string
	// Timeout bounds how long an operation waits for a peer to make
	// progress before it fails with ErrPeerTimeout. It must exceed the
	// largest expected lag between ranks entering the same operation.
	Timeout time.Duration
	// ConnectTimeout bounds how long New waits for its ring neighbours,
	// which may start later than this rank.
	ConnectTimeout time.Duration
	// HandshakeTimeout, NoticeTimeout and ProbeTimeout bound the peer
	// mesh's hellos, failure notices and probes (see MeshConfig; zero:
	// DefaultHandshakeTimeout, DefaultNoticeTimeout, DefaultProbeTimeout).
	HandshakeTimeout, NoticeTimeout, ProbeTimeout time.Duration
	// ChunkBytes is the pipelining unit: operations move data in chunks of
	// at most this many bytes, so that sending one chunk overlaps receiving
	// and reducing the next.
	ChunkBytes int
	// SocketBufferBytes sets the kernel send and receive buffers of every
	// connection (capped by the kernel's net.core.[rw]mem_max). Negative
	// leaves them to the kernel's autotuning.
	SocketBufferBytes int
	// NoSharedMemory keeps the TCP link's bytes on TCP between ranks on
	// one host too, which otherwise go through shared memory (TCPLinker).
	// Every rank of a communicator must set it alike.
	NoSharedMemory bool
	// SmallBytes picks the allreduce algorithm: allreduces of at most this
	// many bytes, and barriers, run a binomial tree (2 log2 n steps, each
	// moving the whole vector), larger ones the ring (2(n-1) steps, each
	// moving 1/n of it). Zero means the default for the world size
	// (DefaultSmallBytes, at most 64 KiB when every peer is on one host
	// and the bytes go through shared memory, where allreduces of at most
	// 16 KiB and barriers run on a host segment instead: host.go);
	// negative forces the ring for every size.
	SmallBytes int
	// RanksPerHost turns on the hierarchical allreduce (hier.go) when the
	// ranks span hosts of several ranks each: by default a cost model
	// (choose.go) then picks the tree, the hierarchy or the ring by size;
	// with SmallBytes set, the hierarchy runs every allreduce the tree
	// does not. Positive puts each run of this many consecutive ranks on
	// a host of its own (hosts simulated by rank groups), HostsFromPeers
	// reads each rank's host from Peers. Zero (the default) keeps to the
	// tree and the flat ring: the hierarchy is measured here on one host
	// only (docs/benchmarks.md).
	RanksPerHost int
	// Link builds the data link between ring neighbours; nil means TCP
	// (TCPLinker with SocketBufferBytes and NoSharedMemory). Whatever the link, the ranks
	// meet, authenticate and agree on failures over the peer mesh on the
	// peer port.
	Link Linker
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// LinkCheck is how often the rank times a probe of each peer it has a
	// data link with (zero: DefaultLinkCheck; negative: never); a link
	// whose probes take longer than SlowLink (zero: DefaultSlowLink) twice
	// in a row is slow: logged, and given to OnSlowLink when set.
	LinkCheck  time.Duration
	SlowLink   time.Duration
	OnSlowLink func(SlowLink)

	// hostSegment makes tests run the host segment (host.go) whatever
	// the link, the hosts and SmallBytes say.
	hostSegment bool
	// hostFutex makes ranks in one process sleep on the host segment's
	// futex, as ranks in processes of their own do.
	hostFutex bool
}

// DefaultConfig returns a Config with every tunable set to its default; the
// caller fills in Rank, WorldSize, Peers and usually Listener and JobID.
func DefaultConfig() Config {
	return Config{
		Timeout:           DefaultTimeout,
		ConnectTimeout:    DefaultConnectTimeout,
		HandshakeTimeout:  DefaultHandshakeTimeout,
		NoticeTimeout:     DefaultNoticeTimeout,
		ProbeTimeout:      DefaultProbeTimeout,
		ChunkBytes:        DefaultChunkBytes,
		SocketBufferBytes: DefaultSocketBufferBytes,
	}
}

// withDefaults returns c with zero tunables replaced by their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	c.HandshakeTimeout = cmp.Or(c.HandshakeTimeout, d.HandshakeTimeout)
	c.NoticeTimeout = cmp.Or(c.NoticeTimeout, d.NoticeTimeout)
	c.ProbeTimeout = cmp.Or(c.ProbeTimeout, d.ProbeTimeout)
	if c.ChunkBytes == 0 {
		c.ChunkBytes = d.ChunkBytes
	}
	if c.SocketBufferBytes == 0 {
		c.SocketBufferBytes = d.SocketBufferBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first problem with c, naming the field.
func (c Config) Validate() error {
	if c.WorldSize < 1 {
		return fmt.Errorf("collective: world size %d: must be at least 1", c.WorldSize)
	}
	if c.Rank < 0 || c.Rank >= c.WorldSize {
		return fmt.Errorf("collective: rank %d: must be in [0, %d)", c.Rank, c.WorldSize)
	}
	if c.WorldSize > 1 || len(c.Peers) > 0 {
		if len(c.Peers) != c.WorldSize {
			return fmt.Errorf("collective: %d peer addresses for world size %d: need one per rank", len(c.Peers), c.WorldSize)
		}
		for i, p := range c.Peers {
			if _, _, err := net.SplitHostPort(p); err != nil {
				return fmt.Errorf("collective: peer address %q of rank %d: %w", p, i, err)
			}
		}
	}
	if c.Incarnations != nil && len(c.Incarnations) != c.WorldSize {
		return fmt.Errorf("collective: %d incarnations for world size %d: need one per rank", len(c.Incarnations), c.WorldSize)
	}
	if c.Listener != nil && len(c.Peers) > c.Rank {
		if err := checkListenerPort(c.Listener, c.Peers[c.Rank]); err != nil {
			return fmt.Errorf("collective: listener of rank %d: %w", c.Rank, err)
		}
	}
	if c.RanksPerHost < HostsFromPeers {
		return fmt.Errorf("collective: %d ranks per host: want a count, 0 or HostsFromPeers", c.RanksPerHost)
	}
	if c.RanksPerHost > 0 && c.WorldSize%c.RanksPerHost != 0 {
		return fmt.Errorf("collective: %d ranks per host: does not divide world size %d", c.RanksPerHost, c.WorldSize)
	}
	if c.Token != "" && len(c.Token) < minTokenLen {
		return fmt.Errorf("collective: peer token is %d bytes long: need at least %d", len(c.Token), minTokenLen)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("collective: timeout %s: must be positive", c.Timeout)
	}
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("collective: connect timeout %s: must be positive", c.ConnectTimeout)
	}
	if c.ChunkBytes < 0 {
		return fmt.Errorf("collective: chunk size %d bytes: must be positive", c.ChunkBytes)
	}
	return nil
}

// checkListenerPort verifies that ln listens on the port of addr, so a
// wrongly wired listener fails at start rather than as a connect timeout on
// the neighbours.
func checkListenerPort(ln net.Listener, addr string) error {
	_, want, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return fmt.Errorf("listener on %s is not TCP", ln.Addr())
	}
	if strconv.Itoa(tcp.Port) != want {
		return fmt.Errorf("listener is on port %d but the peer address is %s", tcp.Port, addr)
	}
	return nil
}

// ConfigFromEnv builds a Config from the training-process environment the
// Spindle executor sets (SPINDLE_RANK, SPINDLE_WORLD_SIZE, SPINDLE_PEERS,
// SPINDLE_PEER_LISTEN_FD, SPINDLE_JOB_ID, SPINDLE_COLLECTIVE_TIMEOUT,
// SPINDLE_PEER_TOKEN, SPINDLE_COLLECTIVE_LINK).
// Errors name the variable at fault. When SPINDLE_PEER_LISTEN_FD is set the
// returned Config owns the inherited listener.
func ConfigFromEnv() (Config, error) {
	return configFromEnv(os.LookupEnv)
}

func configFromEnv(lookup func(string) (string, bool)) (Config, error) {
	cfg := DefaultConfig()
	var err error
	if cfg.Rank, err = envInt(lookup, EnvRank); err != nil {
		return Config{}, err
	}
	if cfg.WorldSize, err = envInt(lookup, EnvWorldSize); err != nil {
		return Config{}, err
	}
	if cfg.WorldSize < 1 {
		return Config{}, fmt.Errorf("collective: %s=%d: must be at least 1", EnvWorldSize, cfg.WorldSize)
	}
	if cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize {
		return Config{}, fmt.Errorf("collective: %s=%d: must be in [0, %s=%d)", EnvRank, cfg.Rank, EnvWorldSize, cfg.WorldSize)
	}
	peers, from, err := envcontract.LookupPeers(lookup)
	if err != nil {
		return Config{}, fmt.Errorf("collective: %w", err)
	}
	if strings.TrimSpace(peers) == "" {
		return Config{}, fmt.Errorf("collective: %s is not set (nor %s): need the comma-separated host:port of every rank",
			EnvPeers, envcontract.PeersFile)
	}
	for _, p := range strings.Split(peers, ",") {
		p = strings.TrimSpace(p)
		if _, _, err := net.SplitHostPort(p); err != nil {
			return Config{}, fmt.Errorf("collective: %s: address %q: %w", from, p, err)
		}
		cfg.Peers = append(cfg.Peers, p)
	}
	if len(cfg.Peers) != cfg.WorldSize {
		return Config{}, fmt.Errorf("collective: %s has %d addresses but %s=%d", from, len(cfg.Peers), EnvWorldSize, cfg.WorldSize)
	}
	cfg.JobID, _ = lookup(EnvJobID)
	cfg.Token, _ = lookup(EnvPeerToken)
	if cfg.Token != "" && len(cfg.Token) < minTokenLen {
		// Never the value: it is a secret.
		return Config{}, fmt.Errorf("collective: %s is %d bytes long: need at least %d", EnvPeerToken, len(cfg.Token), minTokenLen)
	}
	if v, ok := lookup(EnvTimeoutSecs); ok && strings.TrimSpace(v) != "" {
		secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || secs <= 0 || secs > 1e6 {
			return Config{}, fmt.Errorf("collective: %s=%q: want a positive number of seconds", EnvTimeoutSecs, v)
		}
		cfg.Timeout = time.Duration(secs * float64(time.Second))
	}
	if v, ok := lookup(EnvIncarnations); ok && strings.TrimSpace(v) != "" {
		if cfg.Incarnations, err = incarnationsFromEnv(v, cfg.WorldSize); err != nil {
			return Config{}, err
		}
	}
	if v, ok := lookup(EnvPeerFD); ok && strings.TrimSpace(v) != "" {
		fd, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || fd < 0 {
			return Config{}, fmt.Errorf("collective: %s=%q: want a file descriptor number", EnvPeerFD, v)
		}
		ln, err := listenerFromFD(fd)
		if err != nil {
			return Config{}, fmt.Errorf("collective: %s=%d: %w", EnvPeerFD, fd, err)
		}
		if err := checkListenerPort(ln, cfg.Peers[cfg.Rank]); err != nil {
			ln.Close()
			return Config{}, fmt.Errorf("collective: %s=%d and %s: %w", EnvPeerFD, fd, EnvPeers, err)
		}
		cfg.Listener = ln
	}
	if v, ok := lookup(EnvLink); ok {
		spec, err := ParseLinkSpec(v)
		if err == nil {
			spec.TCP = TCPLinker{SocketBufferBytes: cfg.SocketBufferBytes, NoSharedMemory: cfg.NoSharedMemory}
			cfg.Link, err = linkerFor(spec)
		}
		if err != nil {
			if cfg.Listener != nil {
				cfg.Listener.Close()
			}
			return Config{}, err
		}
	}
	return cfg, nil
}

// incarnationsFromEnv parses EnvIncarnations's value for a world of n.
func incarnationsFromEnv(v string, n int) ([]uint32, error) {
	fields := strings.Split(v, ",")
	if len(fields) != n {
		return nil, fmt.Errorf("collective: %s=%q: %d incarnations for %s=%d: need one per rank", EnvIncarnations, v, len(fields), EnvWorldSize, n)
	}
	out := make([]uint32, n)
	for i, f := range fields {
		x, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("collective: %s=%q: rank %d: %q is not a count", EnvIncarnations, v, i, f)
		}
		out[i] = uint32(x)
	}
	return out, nil
}

func envInt(lookup func(string) (string, bool), name string) (int, error) {
	v, ok := lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return 0, fmt.Errorf("collective: %s is not set", name)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("collective: %s=%q: not an integer", name, v)
	}
	return n, nil
}

// listenerFromFD turns an inherited descriptor into a net.Listener. The
// descriptor is duplicated by net.FileListener and the original closed, so
// the process holds exactly one reference to the socket.
func listenerFromFD(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), EnvPeerFD)
	if f == nil {
		return nil, fmt.Errorf("not an open file descriptor")
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("not a listening socket: %w", err)
	}
	if _, ok := ln.Addr().(*net.TCPAddr); !ok {
		ln.Close()
		return nil, fmt.Errorf("listener on %s is not TCP", ln.Addr())
	}
	return ln, nil
}

// FromEnv joins the communicator described by the training-process
// environment (see ConfigFromEnv). It blocks until the ring neighbours are
// connected.
func FromEnv(ctx context.Context) (*Comm, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg)
}
