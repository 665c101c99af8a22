package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-ml/spindle/internal/rpc"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
)

// DefaultWaitTimeout is how long a pull waits for slow workers while no
// clock moves before it fails naming them.
const DefaultWaitTimeout = 10 * time.Minute

// DefaultRejoinTimeout bounds a replacement server's rejoining the ring:
// past it, the replacement fails.
const DefaultRejoinTimeout = 2 * time.Minute

// DefaultProbeTimeout bounds a quick question to another server, which a
// live one answers at once: the coordinator's check that a reported
// server is gone (a killed server's port refuses at once), a rejoining
// server's ask for each live one's clocks.
const DefaultProbeTimeout = time.Second

// MaxMessageBytes bounds one request or reply: a pull of 64k keys of dim
// 256 is 64 MiB.
const MaxMessageBytes = 256 << 20

var errWaitTimeout = errors.New("consistency wait timed out")

// Config is one server's place in its job.
type Config struct {
	// Index is this server's index on the ring.
	Index int
	// Ring places the keys on the job's servers.
	Ring *ps.Ring
	// Workers is the number of workers (clients) of the job.
	Workers int
	// Staleness is the job's consistency model.
	Staleness ps.Staleness
	// WaitTimeout bounds a pull's wait for slow workers while no clock
	// moves (DefaultWaitTimeout when 0).
	WaitTimeout time.Duration
	// RejoinTimeout bounds a replacement's rejoining the ring
	// (DefaultRejoinTimeout when 0); ProbeTimeout a quick question to
	// another server (DefaultProbeTimeout when 0).
	RejoinTimeout, ProbeTimeout time.Duration
	// MemoryBytes is what the server's rows may take (0: no bound);
	// creating a row beyond it fails naming the table.
	MemoryBytes int64
	// Files resolves checkpoint directories (local or hdfs://); nil uses
	// the environment's Hadoop configuration.
	Files *fsys.Resolver
	// Replicas is the number of backups of each row: the next
	// Replicas live servers on the ring hold copies, and a push is
	// acknowledged only once they have applied it. PeerCreds authenticate
	// this server's calls to the others.
	Replicas  int
	PeerCreds credentials.TransportCredentials
	// DataLink is the job's data link, as SPINDLE_COLLECTIVE_LINK holds
	// it: "ucx" (or "ucx:required") serves workers' pulls and pushes over
	// UCX too, for the workers that open a session; empty or "tcp" serves
	// them over gRPC only.
	DataLink string
	Logger   *slog.Logger
}

// Server is one parameter server.
type Server struct {
	pspb.UnimplementedParameterServerServer
	cfg    Config
	log    *slog.Logger
	clocks *clocks
	budget budget
	ckpt   checkpoints
	// life ends when Serve stops: background checkpoints end with it.
	life     context.Context
	stopLife context.CancelFunc

	mu     sync.RWMutex
	tables map[string]*table

	// ring is the ring this server routes by; it changes when a server
	// is taken out (AdoptRing).
	ring atomic.Pointer[ps.Ring]
	// gate is held shared by pushes and exclusively while the server moves
	// to a new ring and copies rows to their new backups.
	gate    sync.RWMutex
	applied *dedupe
	// sent remembers what a failed push's replication sent each backup.
	sent *sentParts
	// joining is set while the server is a replacement rejoining the
	// ring (from Join until Admit): it serves no ring that has it alive
	// and coordinates nothing.
	joining atomic.Bool
	viewMu  sync.Mutex // serialises ReportDead and Rejoin
	adoptMu sync.Mutex // serialises AdoptRing
	peersMu sync.Mutex
	peers   map[string]*grpc.ClientConn // by address: a replacement has another
	// background is the goroutines a server runs besides its calls (a
	// replacement's clock catch-up); Serve waits for them.
	background sync.WaitGroup
	// pullsServed and pushesServed count the calls workers made, their
	// keys and the time the server took to answer.
	pullsServed, pushesServed served
	// data is the UCX data link, when the job has one.
	data dataLink
}

// served counts the keys of a kind of call and the time spent on them.
type served struct{ keys, nanos atomic.Uint64 }

// add counts one call of n keys that started at start.
func (c *served) add(n int, start time.Time) {
	c.keys.Add(uint64(n))
	c.nanos.Add(uint64(time.Since(start)))
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Ring == nil:
		return nil, errors.New("ps server: no ring")
	case cfg.Index < 0 || cfg.Index >= len(cfg.Ring.Servers()):
		return nil, fmt.Errorf("ps server: index %d outside a ring of %d servers", cfg.Index, len(cfg.Ring.Servers()))
	case cfg.Workers < 1:
		return nil, fmt.Errorf("ps server: %d workers: need at least 1", cfg.Workers)
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = DefaultWaitTimeout
	}
	if cfg.RejoinTimeout <= 0 {
		cfg.RejoinTimeout = DefaultRejoinTimeout
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	link, err := collective.ParseLinkSpec(cfg.DataLink)
	if err != nil {
		return nil, fmt.Errorf("ps server: data link: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("ps", cfg.Index), clocks: newClocks(cfg.Workers, cfg.Staleness),
		tables: make(map[string]*table)}
	s.ring.Store(cfg.Ring)
	s.data.spec = link
	// Made here, not as Serve starts the link: a server closed before it
	// served (a test cutting it off at once) stops a link that never ran.
	s.data.stop = make(chan struct{})
	s.data.names = map[string]string{}
	s.applied = newDedupe()
	s.sent = newSentParts()
	s.peers = map[string]*grpc.ClientConn{}
	s.budget = budget{limit: cfg.MemoryBytes, full: s.memoryFull}
	s.ckpt = checkpoints{byClock: map[int64]*pendingCkpt{}, restored: map[string]int64{}}
	s.life, s.stopLife = context.WithCancel(context.Background())
	return s, nil
}

// memoryFull is the error of a row that does not fit.
func (s *Server) memoryFull(need int64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	msg := fmt.Sprintf("ps %d out of memory for its shard: %d MiB used of spindle.ps.memory %d MiB", s.cfg.Index,
		s.budget.used.Load()>>20, s.cfg.MemoryBytes>>20)
	for name, t := range s.tables {
		msg += fmt.Sprintf("; table %s: %d keys of dim %d", name, t.keys.Load(), t.dim)
	}
	return rpc.Errorf(errNoMemory, "%s", msg+" (give the servers more memory or add servers: --num-ps)")
}

// Serve serves s on ln behind creds until ctx ends, then stops, letting
// the calls under way finish for up to a second.
func (s *Server) Serve(ctx context.Context, ln net.Listener, creds credentials.TransportCredentials) error {
	if err := s.startDataLink(); err != nil {
		ln.Close()
		return err
	}
	// The data link goes first: its sessions' streams would hold the
	// graceful stop, and its handlers end with their sessions.
	defer s.stopDataLink()
	g := rpc.NewServer(rpc.ServerConfig{Logger: s.log, Codes: errorCodes,
		Options: []grpc.ServerOption{grpc.Creds(creds), grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}})
	pspb.RegisterParameterServerServer(g, s)
	done := make(chan error, 1)
	go func() { done <- g.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("ps %d: serve: %w", s.cfg.Index, err)
	case <-ctx.Done():
	}
	s.stopDataLink()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		g.Stop()
		<-stopped
	}
	<-done
	s.stopLife()
	s.ckpt.wg.Wait()
	s.background.Wait()
	s.closePeers()
	return nil
}

// DeclareTable implements pspb.ParameterServerServer.
func (s *Server) DeclareTable(_ context.Context, req *pspb.DeclareTableRequest) (*pspb.DeclareTableResponse, error) {
	spec := proto.Clone(req.GetSpec()).(*pspb.TableSpec)
	if err := ps.Normalize(spec); err != nil {
		return nil, rpc.Errorf(errBadRequest, "%s", err.Error())
	}
	same := func(t *table) (*pspb.DeclareTableResponse, error) {
		if !proto.Equal(t.spec, spec) {
			return nil, rpc.Errorf(errExists, "table %s is declared already with another spec (%v; this one: %v): every worker must declare it alike",
				spec.Name, t.spec, spec)
		}
		return &pspb.DeclareTableResponse{}, nil
	}
	s.mu.RLock()
	t, ok := s.tables[spec.Name]
	s.mu.RUnlock()
	if ok {
		return same(t)
	}
	// Built outside the lock: a dense table's rows take memory, and the
	// error of a spent budget reads the tables.
	t = newTable(spec)
	if spec.Rows > 0 {
		// A dense table has all its rows from the start: those this
		// server owns and those it backs up.
		ring := s.ring.Load()
		var mine []uint64
		holders := make([]int, 0, s.cfg.Replicas+1)
		for k := range spec.Rows {
			if holders = ring.Holders(holders[:0], k, spec.Rows, s.cfg.Replicas); slices.Contains(holders, s.cfg.Index) {
				mine = append(mine, k)
			}
		}
		if err := t.ensure(mine, &s.budget); err != nil {
			s.budget.give(int64(t.keys.Load()) * t.rowBytes())
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other, ok := s.tables[spec.Name]; ok { // declared meanwhile by another worker
		s.budget.give(int64(t.keys.Load()) * t.rowBytes())
		return same(other)
	}
	s.tables[spec.Name] = t
	s.log.Info("table declared", "table", spec.Name, "dim", spec.Dim, "optimizer", spec.Optimizer.Kind, "dense_rows", spec.Rows)
	return &pspb.DeclareTableResponse{}, nil
}

// lookup returns the table a request names and checks its routing: the
// ring version and that this server owns every key on ring.
func (s *Server) lookup(name string, version uint64, keys []uint64, ring *ps.Ring) (*table, error) {
	t, err := s.table(name)
	if err != nil {
		return nil, err
	}
	if v := ring.Version(); version != v {
		return nil, rpc.Errorf(errWrongState, "%s: client ring version %d, server %d holds version %d", errStaleRing, version, s.cfg.Index, v)
	}
	// The only live server owns every key: it checks only a dense
	// table's bounds.
	sole := ring.Sole() == s.cfg.Index
	for _, k := range keys {
		if t.spec.Rows > 0 && k >= t.spec.Rows {
			return nil, rpc.Errorf(errBadRequest, "table %s: row %d outside its %d rows", name, k, t.spec.Rows)
		}
		if sole {
			continue
		}
		if owner := ring.OwnerOf(k, t.spec.Rows); owner != s.cfg.Index {
			return nil, rpc.Errorf(errBadRequest, "table %s: key %d belongs to server %d, not %d, on ring version %d", name, k, owner, s.cfg.Index, ring.Version())
		}
	}
	return t, nil
}

// waitKind is the kind of a consistency wait that failed: the worker's
// own call ended, or the wait timed out.
func waitKind(err error) error {
	if errors.Is(err, errWaitTimeout) {
		return errTimedOut
	}
	return errCanceled
}

// decodePush reads a push's keys and gradients (a worker's, or a
// primary's forward).
func decodePush(req *pspb.PushRequest) ([]uint64, []float32, error) {
	keys, err := ps.BytesKeys(req.Keys)
	if err != nil {
		return nil, nil, rpc.Errorf(errBadRequest, "table %s: %v", req.Table, err)
	}
	grads, err := ps.BytesFloats(req.Grads)
	if err != nil {
		return nil, nil, rpc.Errorf(errBadRequest, "table %s: %v", req.Table, err)
	}
	return keys, grads, nil
}

// errStaleRing starts the message of a request routed by another ring;
// clients look for it.
const errStaleRing = "stale ring"

func (s *Server) worker(w int32) error {
	if w < 0 || int(w) >= s.cfg.Workers {
		return rpc.Errorf(errBadRequest, "worker %d: the job has workers 0 to %d", w, s.cfg.Workers-1)
	}
	return nil
}

// Pull implements pspb.ParameterServerServer.
func (s *Server) Pull(ctx context.Context, req *pspb.PullRequest) (*pspb.PullResponse, error) {
	out, err := s.pull(ctx, req, func(n int) []float32 { return make([]float32, n) })
	if err != nil {
		return nil, err
	}
	return &pspb.PullResponse{Values: ps.FloatBytes(out)}, nil
}

// pull answers a pull over either link: alloc gives the memory of its n
// values (the data link's registered reply buffer, or a new slice).
func (s *Server) pull(ctx context.Context, req *pspb.PullRequest, alloc func(n int) []float32) ([]float32, error) {
	if err := s.worker(req.Worker); err != nil {
		return nil, err
	}
	keys, err := ps.BytesKeys(req.Keys)
	if err != nil {
		return nil, rpc.Errorf(errBadRequest, "table %s: %v", req.Table, err)
	}
	// The time a pull waits for slower workers' clocks counts: it is what
	// the worker waits.
	defer s.pullsServed.add(len(keys), time.Now())
	t, err := s.lookup(req.Table, req.RingVersion, keys, s.ring.Load())
	if err != nil {
		return nil, err
	}
	if err := s.clocks.wait(ctx, int(req.Worker), req.Clock, s.cfg.WaitTimeout); err != nil {
		return nil, rpc.Errorf(waitKind(err), "ps %d: %v", s.cfg.Index, err)
	}
	out := alloc(len(keys) * t.dim)
	if err := t.pull(keys, out, &s.budget); err != nil {
		return nil, err
	}
	return out, nil
}

// Push implements pspb.ParameterServerServer.
func (s *Server) Push(ctx context.Context, req *pspb.PushRequest) (*pspb.PushResponse, error) {
	if err := s.worker(req.Worker); err != nil {
		return nil, err
	}
	keys, grads, err := decodePush(req)
	if err != nil {
		return nil, err
	}
	defer s.pushesServed.add(len(keys), time.Now())
	var down = -1 // a backup that did not answer
	resp, err := func() (*pspb.PushResponse, error) {
		s.gate.RLock()
		defer s.gate.RUnlock()
		ring := s.ring.Load()
		t, err := s.lookup(req.Table, req.RingVersion, keys, ring)
		if err != nil {
			return nil, err
		}
		if len(grads) != len(keys)*t.dim {
			return nil, rpc.Errorf(errBadRequest, "table %s has dim %d: %d keys need %d gradient values, got %d; nothing applied",
				req.Table, t.dim, len(keys), len(keys)*t.dim, len(grads))
		}
		id := idOf(req)
		if req.Seq != 0 {
			fresh, err := s.applied.begin(id)
			if err != nil {
				return nil, err
			}
			if !fresh {
				return &pspb.PushResponse{Duplicate: true}, nil
			}
		}
		applied := false
		defer func() {
			if req.Seq != 0 {
				s.applied.end(id, applied)
			}
		}()
		// The backups first: a push this server applied is one they have.
		if s.cfg.Replicas > 0 {
			if b, err := s.replicate(ctx, ring, req, id, keys, grads, t); err != nil {
				down = b
				return nil, err
			}
		}
		if err := t.push(keys, grads, &s.budget); err != nil {
			return nil, err
		}
		applied = true
		return &pspb.PushResponse{}, nil
	}()
	if down >= 0 {
		// Out of the gate: taking the backup out moves this server to a
		// new ring, which waits for the pushes under way.
		s.takeOut(ctx, down)
		return nil, rpc.Errorf(errWrongState, "%s: backup server %d did not answer (%v); refresh the ring and retry", errStaleRing, down, err)
	}
	return resp, err
}

// Clock implements pspb.ParameterServerServer.
func (s *Server) Clock(_ context.Context, req *pspb.ClockRequest) (*pspb.ClockResponse, error) {
	if err := s.worker(req.Worker); err != nil {
		return nil, err
	}
	if req.CheckpointDir != "" {
		s.askCheckpoint(int(req.Worker), req.Clock, req.CheckpointDir)
	} else {
		s.clocks.advance(int(req.Worker), req.Clock)
	}
	return &pspb.ClockResponse{}, nil
}

// Barrier implements pspb.ParameterServerServer.
func (s *Server) Barrier(ctx context.Context, req *pspb.ClockRequest) (*pspb.ClockResponse, error) {
	if err := s.worker(req.Worker); err != nil {
		return nil, err
	}
	if err := s.clocks.waitAll(ctx, req.Clock, s.cfg.WaitTimeout); err != nil {
		return nil, rpc.Errorf(waitKind(err), "ps %d: barrier of worker %d: %v", s.cfg.Index, req.Worker, err)
	}
	return &pspb.ClockResponse{}, nil
}

// Leave implements pspb.ParameterServerServer.
func (s *Server) Leave(_ context.Context, req *pspb.LeaveRequest) (*pspb.LeaveResponse, error) {
	if err := s.worker(req.Worker); err != nil {
		return nil, err
	}
	s.clocks.leave(int(req.Worker))
	s.log.Debug("worker left", "worker", req.Worker)
	return &pspb.LeaveResponse{}, nil
}

// GetRing implements pspb.ParameterServerServer.
func (s *Server) GetRing(context.Context, *pspb.GetRingRequest) (*pspb.RingInfo, error) {
	return s.ringInfo(s.ring.Load()), nil
}

// Report is what the server tells its job's driver (see reportEvery):
// its rows and their memory now, and since it started the pushes and
// pulls it applied, the keys workers pushed and pulled and the seconds it
// spent answering them. observe/metrics turns these names into the
// spindle_ps_* metrics.
func (s *Server) Report() map[string]float64 {
	keys, bytes, pushes, pulls := s.totals()
	return map[string]float64{"ps_keys": float64(keys), "ps_bytes": float64(bytes),
		"ps_pushes": float64(pushes), "ps_pulls": float64(pulls),
		"ps_push_keys": float64(s.pushesServed.keys.Load()), "ps_pull_keys": float64(s.pullsServed.keys.Load()),
		"ps_push_seconds": float64(s.pushesServed.nanos.Load()) / 1e9, "ps_pull_seconds": float64(s.pullsServed.nanos.Load()) / 1e9}
}

// totals sums every table's rows, their memory, and the pushes and pulls
// applied.
func (s *Server) totals() (keys, bytes, pushes, pulls uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, t := range s.tables {
		k := t.keys.Load()
		keys += k
		bytes += k * uint64(t.rowBytes())
		pushes += t.pushes.Load()
		pulls += t.pulls.Load()
	}
	return keys, bytes, pushes, pulls
}

// Stats implements pspb.ParameterServerServer.
func (s *Server) Stats(context.Context, *pspb.StatsRequest) (*pspb.StatsResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := &pspb.StatsResponse{Server: int32(s.cfg.Index), Clocks: s.clocks.snapshot()}
	ring := s.ring.Load()
	for name, t := range s.tables {
		out.Tables = append(out.Tables, &pspb.TableStats{Name: name, Keys: t.keys.Load(), OwnedKeys: t.owned(ring, s.cfg.Index),
			Bytes: t.keys.Load() * uint64(t.rowBytes()), Pushes: t.pushes.Load(), Pulls: t.pulls.Load()})
	}
	return out, nil
}

// Export implements pspb.ParameterServerServer.
func (s *Server) Export(req *pspb.ExportRequest, stream grpc.ServerStreamingServer[pspb.ExportChunk]) error {
	s.mu.RLock()
	t, ok := s.tables[req.Table]
	s.mu.RUnlock()
	if !ok {
		return rpc.Errorf(errNotFound, "ps %d: no table %q", s.cfg.Index, req.Table)
	}
	// The rows this server owns: backups' copies are their owners' to send.
	ring := s.ring.Load()
	return t.each(16384, func(k uint64) bool { return t.owns(ring, s.cfg.Index, k) }, func(keys []uint64, values []float32) error {
		return stream.Send(&pspb.ExportChunk{Keys: ps.KeyBytes(keys), Values: ps.FloatBytes(values)})
	})
}
