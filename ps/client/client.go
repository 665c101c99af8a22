package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/peercred"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// ErrNoServers is returned by FromRanks in a job without parameter servers.
var ErrNoServers = errors.New("ps client: the job has no parameter servers (spindle submit --num-ps N)")

// maxRetries bounds how often one call refreshes a stale ring or fails
// over from a server that does not answer; with the backoff, about ten
// seconds, time for the servers to move to a new ring.
const maxRetries = 25

// Config says where the servers are and who this client is.
type Config struct {
	// Servers are the servers' addresses, by server index.
	Servers []string
	// Token is the job's peer token.
	Token string
	// Worker is this client's worker index, 0 ≤ Worker < the job's
	// number of workers.
	Worker int
	// RingVersion is the version of the ring of Servers (1 at the start
	// of a job).
	RingVersion uint64
	// DataLink is the job's data link, as SPINDLE_COLLECTIVE_LINK holds
	// it: "ucx" sends pulls and pushes over UCX to the servers that offer
	// it (gRPC to the others), "ucx:required" fails instead of falling
	// back; empty or "tcp" keeps them on gRPC.
	DataLink string
	Logger   *slog.Logger
}

// Client talks to a job's parameter servers. Its methods may be called
// from several goroutines, except Clock and Close.
type Client struct {
	cfg   Config
	log   *slog.Logger
	creds credentials.TransportCredentials

	// servers are the connections to the servers, by index; a server's
	// changes when a replacement rejoins the ring at another address.
	serversMu sync.RWMutex
	servers   []endpoint

	ring  atomic.Pointer[ps.Ring]
	clock atomic.Int64
	seq   atomic.Uint64 // numbers pushes, for the servers' duplicate check

	mu     sync.RWMutex
	tables map[string]*pspb.TableSpec

	// data is the UCX data link of pulls and pushes, when the job's is.
	data dataLink
}

// New connects to the servers of cfg. Connections are made lazily and
// authenticated with the token; New itself does not wait for them.
func New(cfg Config) (*Client, error) {
	if cfg.RingVersion == 0 {
		cfg.RingVersion = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ring, err := ps.NewRing(cfg.RingVersion, cfg.Servers, 0)
	if err != nil {
		return nil, err
	}
	creds, err := peercred.New(cfg.Token, ps.Purpose)
	if err != nil {
		return nil, fmt.Errorf("ps client: peer token: %w", err)
	}
	link, err := collective.ParseLinkSpec(cfg.DataLink)
	if err != nil {
		return nil, fmt.Errorf("ps client: data link: %w", err)
	}
	c := &Client{cfg: cfg, log: cfg.Logger, creds: creds, tables: make(map[string]*pspb.TableSpec)}
	c.data.spec = link
	c.ring.Store(ring)
	for i, addr := range cfg.Servers {
		ep, err := c.dial(addr)
		if err != nil {
			c.closeConns()
			return nil, fmt.Errorf("ps client: server %d %s: %w", i, addr, err)
		}
		c.servers = append(c.servers, ep)
	}
	return c, nil
}

// endpoint is a connection to one server, and its data-link session.
type endpoint struct {
	addr string
	conn *grpc.ClientConn
	stub pspb.ParameterServerClient
	data *dataSession
}

func (c *Client) dial(addr string) (endpoint, error) {
	conn, err := rpc.NewClient(addr, rpc.ClientConfig{Options: []grpc.DialOption{grpc.WithTransportCredentials(c.creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage))}})
	if err != nil {
		return endpoint{}, err
	}
	return endpoint{addr: addr, conn: conn, stub: pspb.NewParameterServerClient(conn), data: &dataSession{}}, nil
}

// stub returns the client of server i.
func (c *Client) stub(i int) pspb.ParameterServerClient {
	c.serversMu.RLock()
	defer c.serversMu.RUnlock()
	return c.servers[i].stub
}

// addr returns server i's address.
func (c *Client) addr(i int) string {
	c.serversMu.RLock()
	defer c.serversMu.RUnlock()
	return c.servers[i].addr
}

// grpcWaitForReady lets a call wait for a server still starting.
var grpcWaitForReady = grpc.WaitForReady(true)

// maxMessage matches the servers' bound on a message.
const maxMessage = 256 << 20

// FromRanks connects a training process of a job run with --num-ps to
// the job's servers: the ranks of role ps, reached on their peer ports
// with the job's peer token. The worker index is the rank among the
// job's other ranks (chief and workers). Errors of bad input wrap
// ps.ErrBadEnv.
func FromRanks(r ps.Ranks, logger *slog.Logger) (*Client, error) {
	if r.Servers == 0 {
		return nil, ErrNoServers
	}
	if r.Role == envcontract.RolePS {
		return nil, fmt.Errorf("ps client: rank %d is a parameter server itself", r.Rank)
	}
	if err := r.CheckClient(); err != nil {
		return nil, fmt.Errorf("ps client: %w", err)
	}
	worker := r.Rank
	if worker > r.First {
		worker -= r.Servers // servers come last, but be exact whatever the order
	}
	return New(Config{Servers: r.ServerAddrs(), Token: r.PeerToken, Worker: worker, DataLink: r.DataLink, Logger: logger})
}

// Worker is this client's worker index.
func (c *Client) Worker() int { return c.cfg.Worker }

// Servers is the number of servers.
func (c *Client) Servers() int { return len(c.cfg.Servers) }

// Steps returns the number of steps this worker has finished (its clock).
func (c *Client) Steps() int64 { return c.clock.Load() }

// serverErr names server i in err.
func (c *Client) serverErr(i int, what string, err error) error {
	return fmt.Errorf("%s on parameter server %d (%s): %w", what, i, c.addr(i), err)
}

// each calls fn for every live server at once and waits for all. A
// server that does not answer is reported; once it is out of the ring, it
// is skipped.
func (c *Client) each(ctx context.Context, what string, fn func(ctx context.Context, i int, s pspb.ParameterServerClient) error) error {
	g, gctx := errgroup.WithContext(ctx)
	for i := range c.Servers() {
		if c.ring.Load().Dead(i) {
			continue
		}
		g.Go(func() error {
			for attempt := 0; ; attempt++ {
				err := fn(gctx, i, c.stub(i))
				if err == nil {
					return nil
				}
				if !isUnavailable(err) || attempt == maxRetries {
					return c.serverErr(i, what, err)
				}
				if rerr := c.reportDead(gctx, i); rerr != nil {
					return c.serverErr(i, what, fmt.Errorf("%w; then %w", err, rerr))
				}
				if c.ring.Load().Dead(i) {
					return nil // out of the ring: its part is the others'
				}
				if err := backoff(gctx, attempt); err != nil {
					return c.serverErr(i, what, err)
				}
			}
		})
	}
	return g.Wait()
}

// isInFlight says a server is applying another attempt of the same push:
// retrying finds it applied.
func isInFlight(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Aborted && strings.Contains(st.Message(), "push in flight")
}

func isUnavailable(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable
}

// backoff waits a little longer at each attempt.
func backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(min(time.Duration(20*(attempt+1))*time.Millisecond, 500*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reportDead asks the ring's coordinator to take server i out, and takes
// the ring it answers. A server that still answers stays.
func (c *Client) reportDead(ctx context.Context, i int) error {
	ring := c.ring.Load()
	if ring.Dead(i) {
		return nil
	}
	var last error
	for cand := range c.Servers() {
		if cand == i || ring.Dead(cand) {
			continue
		}
		info, err := c.stub(cand).ReportDead(ctx, &pspb.ReportDeadRequest{Server: int32(i), RingVersion: ring.Version()})
		if err == nil {
			return c.adopt(info)
		}
		if st, _ := status.FromError(err); st.Code() == codes.Aborted {
			// It answers after all, or a replacement answers in its
			// place at another address: take the ring, then retry.
			return c.refreshRing(ctx, cand)
		}
		last = c.serverErr(cand, fmt.Sprintf("report server %d gone", i), err)
	}
	if last == nil {
		last = fmt.Errorf("ps client: no live server left to report server %d to", i)
	}
	return last
}

// adopt takes a ring newer than the client's.
func (c *Client) adopt(info *pspb.RingInfo) error {
	ring, err := ps.RingFromInfo(info)
	if err != nil {
		return err
	}
	if len(info.Servers) != c.Servers() {
		return fmt.Errorf("ps client: the ring changed from %d to %d servers; this client cannot follow", c.Servers(), len(info.Servers))
	}
	if ring.Version() <= c.ring.Load().Version() {
		return nil // an older ring: a replacement's, say, before it rejoined
	}
	// A replacement rejoined at another address: connect to it before
	// any call is routed there by the new ring.
	old, err := c.follow(ring)
	for _, ds := range old {
		ds.close()
	}
	if err != nil {
		return err
	}
	for {
		cur := c.ring.Load()
		if ring.Version() <= cur.Version() {
			return nil
		}
		if c.ring.CompareAndSwap(cur, ring) {
			c.log.Info("parameter-server ring changed", "from", cur.Version(), "to", ring.Version(), "dead", ring.DeadServers())
			return nil
		}
	}
}

// follow connects to the servers whose address changed on ring, unless a
// newer ring is in place already. It returns the data-link sessions of
// the servers replaced, for the caller to close.
func (c *Client) follow(ring *ps.Ring) ([]*dataSession, error) {
	c.serversMu.Lock()
	defer c.serversMu.Unlock()
	if ring.Version() <= c.ring.Load().Version() {
		return nil, nil
	}
	var old []*dataSession
	for i, addr := range ring.Servers() {
		if c.servers[i].addr == addr {
			continue
		}
		ep, err := c.dial(addr)
		if err != nil {
			return old, fmt.Errorf("ps client: server %d's replacement %s: %w", i, addr, err)
		}
		c.log.Info("parameter server replaced", "server", i, "from", c.servers[i].addr, "to", addr)
		c.servers[i].conn.Close() // the old server is dead: no call there can succeed
		old = append(old, c.servers[i].data)
		c.servers[i] = ep
	}
	return old, nil
}

// Declare creates table spec on every server, or checks that the one
// there is the same: every worker declares the tables it uses before
// touching them. Unset fields take their defaults (ps.Normalize).
func (c *Client) Declare(ctx context.Context, spec *ps.TableSpec) error {
	spec = proto.Clone(spec).(*pspb.TableSpec)
	if err := ps.Normalize(spec); err != nil {
		return err
	}
	err := c.each(ctx, "declare table "+spec.Name, func(ctx context.Context, _ int, s pspb.ParameterServerClient) error {
		_, err := s.DeclareTable(ctx, &pspb.DeclareTableRequest{Spec: spec}, grpc.WaitForReady(true))
		return err
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.tables[spec.Name] = spec
	c.mu.Unlock()
	return nil
}

func (c *Client) table(name string) (*pspb.TableSpec, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	spec, ok := c.tables[name]
	if !ok {
		return nil, fmt.Errorf("ps client: table %q: declare it first", name)
	}
	return spec, nil
}

// routed runs call for each server's part of keys. Parts that fail
// because the ring changed (a stale ring, a server that does not answer)
// are routed again by the new ring and retried, the others stand.
func (c *Client) routed(ctx context.Context, what string, spec *pspb.TableSpec, keys []uint64,
	call func(ctx context.Context, i int, s pspb.ParameterServerClient, ring *ps.Ring, p part) error) error {
	ring := c.ring.Load()
	work := map[int][]part{}
	for i, p := range c.split(ring, spec, keys) {
		if len(p.keys) > 0 {
			work[i] = []part{p}
		}
	}
	for attempt := 0; ; attempt++ {
		type failure struct {
			server int
			p      part
			err    error
		}
		var mu sync.Mutex
		var failed []failure
		run := func(i int, p part) {
			if err := call(ctx, i, c.stub(i), ring, p); err != nil {
				mu.Lock()
				failed = append(failed, failure{i, p, err})
				mu.Unlock()
			}
		}
		// Every part but one on a goroutine of its own; the last on this
		// one, whose stack has grown to what a call needs already.
		var wg sync.WaitGroup
		var last func()
		for i, parts := range work {
			for _, p := range parts {
				if last != nil {
					wg.Go(last)
				}
				last = func() { run(i, p) }
			}
		}
		if last != nil {
			last()
		}
		wg.Wait()
		if len(failed) == 0 {
			return nil
		}
		for _, f := range failed {
			if (!isStale(f.err) && !isUnavailable(f.err) && !isInFlight(f.err)) || attempt == maxRetries {
				return c.serverErr(f.server, what, f.err)
			}
		}
		for _, f := range failed {
			if err := c.learnRing(ctx, f.server, f.err); err != nil {
				return fmt.Errorf("%w; then %w", c.serverErr(f.server, what, f.err), err)
			}
		}
		if err := backoff(ctx, attempt); err != nil {
			return c.serverErr(failed[0].server, what, err)
		}
		ring = c.ring.Load()
		work = map[int][]part{}
		for _, f := range failed {
			for s, q := range c.resplit(ring, spec, f.p) {
				work[s] = append(work[s], q)
			}
		}
	}
}

func isStale(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.FailedPrecondition && strings.Contains(st.Message(), "stale ring")
}

// learnRing takes the ring that replaces the one a call to server i
// failed on: from the coordinator when server i did not answer, else from
// server i, which said the call's ring was stale. A server that said so
// and died before it could be asked for its ring is reported gone
// instead: the second of two kills a moment apart, one server replaced
// and another lost.
func (c *Client) learnRing(ctx context.Context, i int, failed error) error {
	switch {
	case isUnavailable(failed):
		return c.reportDead(ctx, i)
	case isStale(failed):
		err := c.refreshRing(ctx, i)
		if isUnavailable(err) {
			return c.reportDead(ctx, i)
		}
		return err
	}
	return nil
}

// refreshRing fetches the ring server i holds.
func (c *Client) refreshRing(ctx context.Context, i int) error {
	info, err := c.stub(i).GetRing(ctx, &pspb.GetRingRequest{})
	if err != nil {
		return c.serverErr(i, "refresh the ring", err)
	}
	if err := c.adopt(info); err != nil {
		return c.serverErr(i, "refresh the ring", err)
	}
	return nil
}

// Pull fills out with the rows of keys (dim values per key, in the order
// of keys). It waits first while this worker is ahead of the slowest by
// more than the job's staleness bound.
func (c *Client) Pull(ctx context.Context, table string, keys []uint64, out []float32) error {
	spec, err := c.table(table)
	if err != nil {
		return err
	}
	dim := int(spec.Dim)
	if len(out) != len(keys)*dim {
		return fmt.Errorf("ps client: pull %d keys of table %s (dim %d) into %d values: want %d", len(keys), table, dim, len(out), len(keys)*dim)
	}
	clock := c.clock.Load()
	return c.routed(ctx, "pull "+table, spec, keys, func(ctx context.Context, i int, s pspb.ParameterServerClient, ring *ps.Ring, p part) error {
		if conn, err := c.dataConn(ctx, i); err != nil {
			return err
		} else if conn != nil {
			return c.pullData(ctx, i, conn, table, ring, clock, p, dim, out)
		}
		resp, err := s.Pull(ctx, &pspb.PullRequest{Table: table, Keys: ps.KeyBytes(p.keys), RingVersion: ring.Version(),
			Worker: int32(c.cfg.Worker), Clock: clock})
		if err != nil {
			return err
		}
		return p.scatter(resp.Values, dim, out)
	})
}

// scatter copies the rows a server sent for p's keys (dim values each, as
// bytes) to where those keys sit in the pull's output.
func (p part) scatter(payload []byte, dim int, out []float32) error {
	values, err := ps.BytesFloats(payload)
	if err != nil {
		return err
	}
	if len(values) != len(p.keys)*dim {
		return fmt.Errorf("sent %d values for %d keys of dim %d", len(values), len(p.keys), dim)
	}
	if p.pos == nil {
		copy(out, values)
		return nil
	}
	for j, at := range p.pos {
		copy(out[int(at)*dim:(int(at)+1)*dim], values[j*dim:(j+1)*dim])
	}
	return nil
}

// Push sends grads (dim values per key, in the order of keys) to be
// applied with the table's optimizer. It returns once every server has
// applied its part.
func (c *Client) Push(ctx context.Context, table string, keys []uint64, grads []float32) error {
	spec, err := c.table(table)
	if err != nil {
		return err
	}
	dim := int(spec.Dim)
	if len(grads) != len(keys)*dim {
		return fmt.Errorf("ps client: push %d keys of table %s (dim %d) with %d gradient values: want %d", len(keys), table, dim, len(grads), len(keys)*dim)
	}
	seq := c.seq.Add(1)
	return c.routed(ctx, "push "+table, spec, keys, func(ctx context.Context, i int, s pspb.ParameterServerClient, ring *ps.Ring, p part) error {
		g := grads
		if p.pos != nil {
			// Only some keys go here: gather their gradients.
			g = make([]float32, len(p.keys)*dim)
			for j, at := range p.pos {
				copy(g[j*dim:(j+1)*dim], grads[int(at)*dim:(int(at)+1)*dim])
			}
		}
		if conn, err := c.dataConn(ctx, i); err != nil {
			return err
		} else if conn != nil {
			return c.pushData(ctx, i, conn, table, ring, seq, p, g)
		}
		_, err := s.Push(ctx, &pspb.PushRequest{Table: table, Keys: ps.KeyBytes(p.keys), Grads: ps.FloatBytes(g),
			RingVersion: ring.Version(), Worker: int32(c.cfg.Worker), Seq: seq, Origin: int32(p.origin)})
		return err
	})
}

// Clock ends this worker's step: call it after the step's pushes have
// returned. Workers waiting on this one's clock go on.
func (c *Client) Clock(ctx context.Context) error {
	next := c.clock.Load() + 1
	err := c.each(ctx, "advance the clock", func(ctx context.Context, _ int, s pspb.ParameterServerClient) error {
		_, err := s.Clock(ctx, &pspb.ClockRequest{Worker: int32(c.cfg.Worker), Clock: next})
		return err
	})
	if err != nil {
		return err
	}
	c.clock.Store(next)
	return nil
}

// Barrier returns once every worker still in the job has finished as
// many steps as this one (Clock), whatever the consistency model: for the
// end of an epoch, or before worker 0 evaluates the model.
func (c *Client) Barrier(ctx context.Context) error {
	clock := c.clock.Load()
	return c.each(ctx, "barrier", func(ctx context.Context, _ int, s pspb.ParameterServerClient) error {
		_, err := s.Barrier(ctx, &pspb.ClockRequest{Worker: int32(c.cfg.Worker), Clock: clock})
		return err
	})
}

// Stats returns every server's statistics, by server index: nil for a
// server out of the ring.
func (c *Client) Stats(ctx context.Context) ([]*pspb.StatsResponse, error) {
	out := make([]*pspb.StatsResponse, c.Servers())
	err := c.each(ctx, "read statistics", func(ctx context.Context, i int, s pspb.ParameterServerClient) error {
		st, err := s.Stats(ctx, &pspb.StatsRequest{})
		out[i] = st
		return err
	})
	return out, err
}

// Export calls fn with every row of table, server after server, in
// batches; fn must not keep the slices.
func (c *Client) Export(ctx context.Context, table string, fn func(keys []uint64, values []float32) error) error {
	for i := range c.Servers() {
		stream, err := c.stub(i).Export(ctx, &pspb.ExportRequest{Table: table})
		if err != nil {
			return c.serverErr(i, "export "+table, err)
		}
		for {
			chunk, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return c.serverErr(i, "export "+table, err)
			}
			keys, err := ps.BytesKeys(chunk.Keys)
			if err != nil {
				return c.serverErr(i, "export "+table, err)
			}
			values, err := ps.BytesFloats(chunk.Values)
			if err != nil {
				return c.serverErr(i, "export "+table, err)
			}
			if err := fn(keys, values); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close tells the servers this worker is done (so that no one waits for
// its clock) and closes the connections.
func (c *Client) Close(ctx context.Context) error {
	err := c.each(ctx, "leave", func(ctx context.Context, _ int, s pspb.ParameterServerClient) error {
		_, err := s.Leave(ctx, &pspb.LeaveRequest{Worker: int32(c.cfg.Worker)})
		return err
	})
	c.closeConns()
	return err
}

// Abandon closes the connections without telling the servers anything:
// they keep waiting for this worker's clock, as for a worker that died.
// It is for a proxy whose process failed; a worker that is done calls
// Close.
func (c *Client) Abandon() { c.closeConns() }

func (c *Client) closeConns() {
	c.closeData()
	c.serversMu.Lock()
	defer c.serversMu.Unlock()
	for _, ep := range c.servers {
		ep.conn.Close()
	}
}
