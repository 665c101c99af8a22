package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/rdma/ucx"
)

// dataLink is the client's UCX side: one UCP worker for every server,
// made on the first pull or push when the job's data link is UCX.
type dataLink struct {
	spec collective.LinkSpec
	once sync.Once
	d    *ucx.Dialer
	why  string // why there is no worker
}

// dataSession is the UCX session with one server (one endpoint: a
// replacement at another address gets its own). Its control is the gRPC
// stream OpenDataLink, held open while the session lives: the stream
// breaking (the server's process ended) fails the calls waiting on it at
// once, as the server's gRPC connection failing fails a gRPC call.
type dataSession struct {
	mu     sync.Mutex
	opened bool      // a session is open (conn), or the server declined
	conn   *ucx.Conn // nil: pulls and pushes go over gRPC
	cancel context.CancelFunc
	closed bool
	wg     sync.WaitGroup // the stream's watcher
}

// dialer returns the client's UCP worker, nil when pulls and pushes go
// over gRPC; with ucx:required, a client that cannot use UCX fails.
func (c *Client) dialer() (*ucx.Dialer, error) {
	l := &c.data
	if l.spec.Name != ucx.Name {
		return nil, nil
	}
	l.once.Do(func() {
		if l.spec.Declined {
			l.why = "no usable RDMA device on this rank"
		} else if d, err := ucx.NewDialer(); err != nil {
			l.why = err.Error()
		} else {
			l.d = d
			c.log.Info("parameter-server data link is ucx", "worker", c.cfg.Worker, "ucx", ucxVersion())
			return
		}
		if !l.spec.Required {
			c.log.Info("parameter-server data link is grpc instead of "+ucx.Name, "worker", c.cfg.Worker, "reason", l.why)
		}
	})
	if l.d == nil && l.spec.Required {
		return nil, fmt.Errorf("ps client: worker %d cannot use UCX (%s=%s): %s", c.cfg.Worker, collective.EnvLink, l.spec, l.why)
	}
	return l.d, nil
}

func ucxVersion() string {
	_, v := ucx.Available()
	return v
}

// dataConn returns the UCX session with server i, opening it on first
// use; nil means gRPC for this server. A server that does not answer
// gives its gRPC error, which the caller's retries handle.
func (c *Client) dataConn(ctx context.Context, i int) (*ucx.Conn, error) {
	d, err := c.dialer()
	if d == nil || err != nil {
		return nil, err
	}
	c.serversMu.RLock()
	ep := c.servers[i]
	c.serversMu.RUnlock()
	ds := ep.data
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.opened || ds.closed {
		return ds.conn, nil
	}
	// The stream lives as long as the session, beyond this call: only
	// its first answer waits on ctx.
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	stream, err := ep.stub.OpenDataLink(sctx, &pspb.DataLinkOffer{Kind: ucx.Name, Address: d.Address(), Worker: int32(c.cfg.Worker)})
	var ans *pspb.DataLinkAnswer
	if err == nil {
		ans, err = stream.Recv()
	}
	if !stop() || err != nil {
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		if status.Code(err) != codes.Unimplemented {
			return nil, err
		}
		// A server without data links.
		ans, err = &pspb.DataLinkAnswer{Declined: "the server has no data links"}, nil
	}
	if ans.Kind != ucx.Name {
		cancel()
		if c.data.spec.Required {
			return nil, status.Errorf(codes.FailedPrecondition, "UCX required (%s=%s) but parameter server %d declines it: %s", collective.EnvLink, c.data.spec, i, ans.Declined)
		}
		c.log.Info("parameter-server data link is grpc", "worker", c.cfg.Worker, "server", i, "reason", ans.Declined)
		ds.opened = true
		return nil, nil
	}
	grant, err := ucx.GrantFromBytes(ans.Grant)
	var conn *ucx.Conn
	if err == nil {
		conn, err = d.Connect(ans.Address, grant)
	}
	if err != nil {
		cancel()
		return nil, status.Errorf(codes.Unavailable, "connect to parameter server %d over UCX: %v", i, err)
	}
	ds.opened, ds.conn, ds.cancel = true, conn, cancel
	ds.wg.Add(1)
	go func() {
		defer ds.wg.Done()
		for {
			if _, err := stream.Recv(); err != nil {
				conn.Lose(fmt.Errorf("the session's stream with parameter server %d ended: %w", i, err))
				return
			}
		}
	}()
	return conn, nil
}

// lost forgets the session conn of ds, so that the next call opens
// another (the server may still be alive: the coordinator says so).
func (ds *dataSession) lost(conn *ucx.Conn) {
	ds.mu.Lock()
	if ds.conn != conn {
		ds.mu.Unlock()
		return
	}
	ds.opened, ds.conn = false, nil
	cancel := ds.cancel
	ds.mu.Unlock()
	cancel()
	ds.wg.Wait()
	conn.Close()
}

// close ends ds for good: its stream and its session.
func (ds *dataSession) close() {
	ds.mu.Lock()
	ds.closed = true
	conn, cancel := ds.conn, ds.cancel
	ds.conn = nil
	ds.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	ds.wg.Wait()
	if conn != nil {
		conn.Close()
	}
}

// dataErr turns the error of a data-link call into what the gRPC call's
// would be: a lost session is the Unavailable of a server that does not
// answer, which the retries handle (report it dead, route again).
func (c *Client) dataErr(i int, conn *ucx.Conn, err error) error {
	if errors.Is(err, ucx.ErrLost) {
		c.serversMu.RLock()
		ds := c.servers[i].data
		c.serversMu.RUnlock()
		ds.lost(conn)
		return status.Errorf(codes.Unavailable, "data link to parameter server %d: %v", i, err)
	}
	return err
}

// replyErr is the error a reply's head carries, nil for OK.
func replyErr(head []byte) (dup bool, err error) {
	st, err := ps.DecodeDataStatus(head)
	if err != nil {
		return false, status.Error(codes.Internal, err.Error())
	}
	if st.Code != 0 {
		return false, status.Error(codes.Code(st.Code), st.Message)
	}
	return st.Duplicate, nil
}

// headBytes holds a request's head: a pull's or push's fields and the
// table's name.
const headBytes = 128

// pullData is a pull of part p over the session conn with server i. A
// part holding every key of the call, in order (no positions), is
// received straight into out.
func (c *Client) pullData(ctx context.Context, i int, conn *ucx.Conn, table string, ring *ps.Ring, clock int64, p part, dim int, out []float32) error {
	var hb [headBytes]byte
	head := ps.AppendDataHead(hb[:0], ps.DataHead{Op: ps.OpPull, Worker: int32(c.cfg.Worker), RingVersion: ring.Version(),
		Clock: clock, Keys: uint32(len(p.keys)), Table: table})
	var into []byte
	if p.pos == nil {
		into = ps.FloatBytes(out)
	}
	r, err := conn.Call(ctx, head, [][]byte{ps.KeyBytes(p.keys)}, into)
	if err != nil {
		return c.dataErr(i, conn, err)
	}
	defer r.Release()
	if _, err := replyErr(r.Head); err != nil {
		return err
	}
	if r.InPlace {
		return nil
	}
	return p.scatter(r.Payload, dim, out)
}

// pushData is a push of part p (its gradients g) over the session conn
// with server i; keys and gradients go from their slices in place.
func (c *Client) pushData(ctx context.Context, i int, conn *ucx.Conn, table string, ring *ps.Ring, seq uint64, p part, g []float32) error {
	var hb [headBytes]byte
	head := ps.AppendDataHead(hb[:0], ps.DataHead{Op: ps.OpPush, Worker: int32(c.cfg.Worker), RingVersion: ring.Version(),
		Seq: seq, Origin: int32(p.origin), Keys: uint32(len(p.keys)), Table: table})
	r, err := conn.Call(ctx, head, [][]byte{ps.KeyBytes(p.keys), ps.FloatBytes(g)}, nil)
	if err != nil {
		return c.dataErr(i, conn, err)
	}
	defer r.Release()
	_, err = replyErr(r.Head)
	return err
}

// closeData ends every session and the UCP worker.
func (c *Client) closeData() {
	c.serversMu.RLock()
	sessions := make([]*dataSession, 0, len(c.servers))
	for _, ep := range c.servers {
		sessions = append(sessions, ep.data)
	}
	c.serversMu.RUnlock()
	for _, ds := range sessions {
		ds.close()
	}
	c.data.once.Do(func() {}) // no worker after this
	if c.data.d != nil {
		c.data.d.Close()
	}
}
