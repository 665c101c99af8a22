package master

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/internal/rpc"
	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
	"github.com/spindle-ml/spindle/standalone/internal/slogadapter"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"

	"google.golang.org/grpc/codes"
)

// Master is one member of the masters' Raft group, serving the gRPC API.
type Master struct {
	cfg    Config
	logger *slog.Logger
	creds  *secure.Credentials
	peers  map[string]Peer

	fsm       *fsm
	raft      *raft.Raft
	store     *raftboltdb.BoltStore
	transport raft.Transport
	notifyCh  chan bool

	lis  net.Listener
	grpc *grpc.Server

	// leader is the state of this master's current term as leader, nil
	// when it does not lead.
	leader atomic.Pointer[leaderState]

	connMu      sync.Mutex
	masterConns map[string]*grpc.ClientConn // by master id
	workerConns map[string]*grpc.ClientConn // by worker address
	leaderTerms atomic.Int64                // terms this master led (metrics)

	stopping  chan struct{} // closed when shutdown starts
	closeOnce sync.Once
	closeErr  error
	ran       atomic.Bool
}

// New opens the data directory, starts Raft and binds the gRPC API; Run
// serves it. A master whose data directory is empty bootstraps the group
// from Peers (every master of a new group does, with the same peers).
func New(cfg Config) (*Master, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, DefaultProbeTimeout)
	cfg.RaftHandshakeTimeout = cmp.Or(cfg.RaftHandshakeTimeout, DefaultRaftHandshakeTimeout)
	cfg.RaftIOTimeout = cmp.Or(cfg.RaftIOTimeout, DefaultRaftIOTimeout)
	creds, err := secure.New(cfg.Secret, cfg.TLS)
	if err != nil {
		return nil, err
	}
	self := cfg.self()
	m := &Master{
		cfg:         cfg,
		logger:      cfg.Logger.With("component", "master", "master", cfg.ID),
		creds:       creds,
		peers:       map[string]Peer{},
		fsm:         newFSM(),
		notifyCh:    make(chan bool, 16),
		masterConns: map[string]*grpc.ClientConn{},
		workerConns: map[string]*grpc.ClientConn{},
		stopping:    make(chan struct{}),
	}
	for _, p := range cfg.Peers {
		m.peers[p.ID] = p
	}
	ok := false
	defer func() {
		if !ok {
			m.release()
		}
	}()

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create master data directory: %w", err)
	}
	m.store, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.DataDir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("open raft store in %s: %w", cfg.DataDir, err)
	}
	hlog := slogadapter.New(cfg.Logger.With("component", "raft", "master", cfg.ID), "raft")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, hlog.Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("open raft snapshots in %s: %w", cfg.DataDir, err)
	}
	logs, err := raft.NewLogCache(256, m.store)
	if err != nil {
		return nil, fmt.Errorf("raft log cache: %w", err)
	}

	if err := m.openTransport(self, hlog); err != nil {
		return nil, err
	}
	rc, err := raftConfig(cfg, m.notifyCh, hlog)
	if err != nil {
		return nil, err
	}

	existing, err := raft.HasExistingState(logs, m.store, snaps)
	if err != nil {
		return nil, fmt.Errorf("read raft state in %s: %w", cfg.DataDir, err)
	}
	m.raft, err = raft.NewRaft(rc, m.fsm, logs, m.store, snaps, m.transport)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	if !existing {
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr), Suffrage: raft.Voter})
		}
		if err := m.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return nil, fmt.Errorf("bootstrap raft group: %w", err)
		}
		m.logger.Info("bootstrapped raft group", "peers", len(servers))
	} else {
		m.logger.Info("restarted from existing raft state", "dir", cfg.DataDir)
	}

	m.lis = cfg.Listener
	if m.lis == nil {
		if m.lis, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	}
	m.grpc = rpc.NewServer(rpc.ServerConfig{Logger: m.logger, Codes: apierr.Codes, Otherwise: codes.Internal,
		Options: creds.ServerOptionsAsAny(audiences(cfg, m.lis.Addr()))})
	pb.RegisterMasterServer(m.grpc, &service{m: m})
	ok = true
	return m, nil
}

// openTransport opens raft's transport between the masters: the one the
// configuration gives (tests), or a stream layer on the raft address,
// authenticated with the cluster's secret and TLS.
func (m *Master) openTransport(self Peer, hlog *slogadapter.Logger) error {
	var err error
	if m.cfg.transport != nil {
		m.transport = m.cfg.transport
	} else {
		rl := m.cfg.RaftListener
		if rl == nil {
			if rl, err = net.Listen("tcp", m.cfg.RaftAddr); err != nil {
				return fmt.Errorf("listen for raft on %s: %w", m.cfg.RaftAddr, err)
			}
		}
		stream, err := newStreamLayer(rl, self.RaftAddr, m.creds.Secret(), m.creds.ServerTLS(), m.creds.ClientTLS, m.cfg.RaftHandshakeTimeout, m.logger)
		if err != nil {
			_ = rl.Close()
			return err
		}
		m.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  stream,
			MaxPool: 3,
			Timeout: m.cfg.RaftIOTimeout,
			Logger:  hlog.Named("net"),
		})
	}
	return nil
}

// raftConfig is raft's configuration for the master cfg describes.
func raftConfig(cfg Config, notifyCh chan bool, hlog *slogadapter.Logger) (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	rc.NotifyCh = notifyCh
	rc.Logger = hlog
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("%w: raft: %v", ErrConfig, err)
	}
	return rc, nil
}

// Addr returns the address the gRPC API listens on.
func (m *Master) Addr() string { return m.lis.Addr().String() }

// ID returns the master's id.
func (m *Master) ID() string { return m.cfg.ID }

// IsLeader says whether this master leads and has taken up its duties.
func (m *Master) IsLeader() bool { return m.leader.Load() != nil }

// RaftTimeouts describes the Raft timing in use, for logs and benchmarks.
func (m *Master) RaftTimeouts() string {
	return fmt.Sprintf("heartbeat %s, election %s, leader lease %s, commit %s",
		m.cfg.HeartbeatTimeout, m.cfg.ElectionTimeout, m.cfg.LeaderLeaseTimeout, m.cfg.CommitTimeout)
}

// Run serves the API and performs the leader's duties whenever this master
// leads, until ctx ends; then it shuts the master down.
func (m *Master) Run(ctx context.Context) error {
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("master: Run called twice")
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := m.grpc.Serve(m.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve master API on %s: %w", m.Addr(), err)
		}
		return nil
	})
	g.Go(func() error { return m.leadership(gctx) })
	m.logger.Info("master running", "addr", m.Addr(), "raft", m.cfg.self().RaftAddr, "raft_timeouts", m.RaftTimeouts())
	<-gctx.Done()
	m.shutdown()
	err := g.Wait()
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return err
}

// shutdown stops serving: streams end, calls under way finish.
func (m *Master) shutdown() {
	select {
	case <-m.stopping:
		return
	default:
		close(m.stopping)
	}
	done := make(chan struct{})
	go func() {
		m.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		m.grpc.Stop()
		<-done
	}
}

// leadership starts and stops the leader's duties as Raft reports changes.
func (m *Master) leadership(ctx context.Context) error {
	var cur *leaderState
	stop := func() {
		if cur != nil {
			cur.stop()
			m.leader.CompareAndSwap(cur, nil)
			cur = nil
			m.logger.Info("stepped down")
		}
	}
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case isLeader := <-m.notifyCh:
			// Raft reports transitions; a "leader" while a term's duties
			// exist means a step-down was missed: start afresh.
			stop()
			if isLeader {
				cur = m.startLeader(ctx)
			}
		}
	}
}

// Close shuts the master down and releases its stores and listeners.
func (m *Master) Close() error {
	m.closeOnce.Do(func() {
		if !m.ran.Load() {
			select {
			case <-m.stopping:
			default:
				close(m.stopping)
			}
			m.grpc.Stop()
		}
		m.closeErr = m.release()
	})
	return m.closeErr
}

// release frees what New took, in reverse order.
func (m *Master) release() error {
	var errs []error
	if m.grpc != nil {
		m.grpc.Stop()
	}
	if m.lis != nil && m.cfg.Listener == nil {
		_ = m.lis.Close()
	}
	if m.raft != nil {
		if err := m.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("shut raft down: %w", err))
		}
	}
	if nt, ok := m.transport.(*raft.NetworkTransport); ok {
		nt.CloseStreams()
	}
	if c, ok := m.transport.(raft.WithClose); ok && m.cfg.transport == nil {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft transport: %w", err))
		}
	}
	if m.store != nil {
		if err := m.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft store: %w", err))
		}
	}
	m.connMu.Lock()
	for _, c := range m.masterConns {
		_ = c.Close()
	}
	for _, c := range m.workerConns {
		_ = c.Close()
	}
	m.masterConns, m.workerConns = map[string]*grpc.ClientConn{}, map[string]*grpc.ClientConn{}
	m.connMu.Unlock()
	return errors.Join(errs...)
}

// apply proposes a command and waits until it is committed and applied.
// The FSM's result comes back as the value or the error.
func (m *Master) apply(t cmdType, cmd any) (any, error) {
	b, err := encode(t, cmd)
	if err != nil {
		return nil, err
	}
	f := m.raft.Apply(b, 10*time.Second)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return nil, fmt.Errorf("%w: %s: %v", apierr.ErrNotLeader, t, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, fmt.Errorf("%w: %s: %v", apierr.ErrStopped, t, err)
		}
		return nil, fmt.Errorf("commit %s: %w", t, err)
	}
	if e, ok := f.Response().(error); ok {
		return nil, e
	}
	return f.Response(), nil
}

// conn returns a cached client connection to addr, dialled with opts.
func (m *Master) conn(cache map[string]*grpc.ClientConn, key, addr string, opts []grpc.DialOption) (*grpc.ClientConn, error) {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if c, ok := cache[key]; ok {
		return c, nil
	}
	c, err := rpc.NewClient(addr, rpc.ClientConfig{Options: opts})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	cache[key] = c
	return c, nil
}

// leaderClient returns a client of the current leader, or nil when this
// master leads.
func (m *Master) leaderClient() (pb.MasterClient, error) {
	if m.IsLeader() {
		return nil, nil
	}
	_, id := m.raft.LeaderWithID()
	if id == "" {
		return nil, fmt.Errorf("%w: election under way", apierr.ErrNoLeader)
	}
	if string(id) == m.cfg.ID {
		return nil, fmt.Errorf("%w: leadership starting", apierr.ErrNotLeader)
	}
	p, ok := m.peers[string(id)]
	if !ok {
		return nil, fmt.Errorf("%w: leader %s has no known address", apierr.ErrNoLeader, id)
	}
	c, err := m.conn(m.masterConns, p.ID, p.Addr, m.creds.DialOptionsTo(secure.MasterAudience(p.Addr)))
	if err != nil {
		return nil, err
	}
	return pb.NewMasterClient(c), nil
}

// workerClient returns a client of the worker at addr.
func (m *Master) workerClient(addr string) (pb.WorkerClient, error) {
	c, err := m.conn(m.workerConns, addr, addr, m.creds.DialOptionsTo(secure.WorkerAudience(addr)))
	if err != nil {
		return nil, err
	}
	return pb.NewWorkerClient(c), nil
}

// Snapshot forces a Raft snapshot (and log compaction); for tests and
// operators.
func (m *Master) Snapshot() error {
	if err := m.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

func nowMS() int64 { return time.Now().UnixMilli() }
