package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("client: invalid configuration")

// Config says how to reach the masters.
type Config struct {
	// Masters are the gRPC addresses (host:port) of the masters; all of
	// them, ideally.
	Masters []string
	// Secret is the cluster secret.
	Secret string
	// TLS optionally enables mutual TLS.
	TLS secure.TLSFiles
	// AttemptTimeout bounds one attempt of a short call on one master, so
	// a master that hangs does not hold the caller up; 0 means 5s.
	AttemptTimeout time.Duration
	// FailFast ends a call as soon as no master accepts a connection at
	// all (every address refuses it), instead of retrying until the
	// caller's deadline: for commands a person waits on.
	FailFast bool
	// LeaderWait bounds how long Status waits for an election to end
	// (no master leads) before it shows a follower's view, which lacks
	// what only the leader knows: applications waiting for room and
	// executors localizing. 0 means 5s, longer than an election with the
	// default Raft timeouts takes.
	LeaderWait time.Duration
	Logger     *slog.Logger
}

// Client calls the masters.
type Client struct {
	cfg     Config
	creds   *secure.Credentials
	logger  *slog.Logger
	conns   []*grpc.ClientConn
	masters []pb.MasterClient
	// next is the master tried first: the last one that answered.
	next atomic.Int32

	mu     sync.Mutex
	closed bool
}

// New returns a client of the masters. It does not connect until the
// first call.
func New(cfg Config) (*Client, error) {
	if len(cfg.Masters) == 0 {
		return nil, fmt.Errorf("%w: no master addresses", ErrConfig)
	}
	for _, a := range cfg.Masters {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("%w: master address %q: want host:port", ErrConfig, a)
		}
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 5 * time.Second
	}
	if cfg.LeaderWait <= 0 {
		cfg.LeaderWait = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	creds, err := secure.New(cfg.Secret, cfg.TLS)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, creds: creds, logger: cfg.Logger}
	for _, a := range cfg.Masters {
		conn, err := rpc.NewClient(a, rpc.ClientConfig{Options: creds.DialOptionsTo(secure.MasterAudience(a))})
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("dial master %s: %w", a, err)
		}
		c.conns = append(c.conns, conn)
		c.masters = append(c.masters, pb.NewMasterClient(conn))
	}
	return c, nil
}

// Credentials returns the credentials the client signs calls with.
func (c *Client) Credentials() *secure.Credentials { return c.creds }

// Masters returns the configured master addresses.
func (c *Client) Masters() []string { return append([]string(nil), c.cfg.Masters...) }

// Close closes the connections.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, conn := range c.conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Call runs call on one master after another, starting with the last one
// that answered, until one succeeds, one fails with an error no other
// master would avoid, or ctx ends. Each attempt is bounded by the
// AttemptTimeout unless long is set (calls that block by design). The
// error, if any, wraps the sentinel the master returned (apierr).
func (c *Client) Call(ctx context.Context, long bool, call func(ctx context.Context, m pb.MasterClient) error) error {
	backoff := minBackoff
	var last error
	for round := 0; ; round++ {
		start := int(c.next.Load())
		refused := 0
		for i := range c.masters {
			idx := (start + i) % len(c.masters)
			actx, cancel := ctx, context.CancelFunc(func() {})
			if !long {
				actx, cancel = context.WithTimeout(ctx, c.cfg.AttemptTimeout)
			}
			err := call(actx, c.masters[idx])
			cancel()
			if err == nil {
				c.next.Store(int32(idx))
				return nil
			}
			err = apierr.FromStatus(err)
			if isWrongService(err) {
				return fmt.Errorf("%s is not a Spindle master (it answered: %s); --master names the masters' addresses (spindle master --addr), not a worker's or another service's",
					c.cfg.Masters[idx], status.Convert(err).Message())
			}
			if isRefused(err) {
				refused++
			}
			if ctx.Err() != nil {
				if last == nil {
					last = err
				}
				return fmt.Errorf("%w (last error from master %s: %v)", ctx.Err(), c.cfg.Masters[idx], last)
			}
			if !retryable(err) {
				c.next.Store(int32(idx))
				if status.Code(err) == codes.Unauthenticated {
					return fmt.Errorf("master %s refused the call; is the cluster secret the same on every master, worker and driver? %w",
						c.cfg.Masters[idx], err)
				}
				return err
			}
			// An attempt the caller's deadline cut short says less than the
			// answer before it ("answered from its replica", "no leader").
			if last == nil || !(isDeadline(err) && deadlineNear(ctx)) {
				last = fmt.Errorf("master %s: %w", c.cfg.Masters[idx], err)
			}
		}
		if c.cfg.FailFast && refused == len(c.masters) {
			return fmt.Errorf("no master accepts connections at %s (connection refused): are the masters running, and is --master right? (last error: %v)",
				strings.Join(c.cfg.Masters, ", "), last)
		}
		if round == 0 {
			c.logger.Debug("no master could serve the call; retrying", "err", last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, MaxRetryWait)
	}
}

// Between rounds of attempts on every master Call waits minBackoff, then
// twice as long each round up to MaxRetryWait. A round that fails is cheap
// (a master without a leader answers at once), and a leader elected while
// the client waits goes unused until the wait ends, so the cap is kept
// small: failover takes a few hundred milliseconds with the default Raft
// timeouts, and a larger cap would add to it.
const (
	minBackoff = 10 * time.Millisecond
	// MaxRetryWait is the longest Call waits before trying every master
	// again.
	MaxRetryWait = 50 * time.Millisecond
)

// retryable says whether another master, or a later try, may succeed.
func retryable(err error) bool {
	if apierr.Retryable(err) {
		return true
	}
	// An attempt that timed out on a hung master: try the next.
	return errors.Is(err, context.DeadlineExceeded) || isDeadline(err)
}

// Kill ends an application by id or unique running name.
func (c *Client) Kill(ctx context.Context, app, reason string) (*pb.AppInfo, error) {
	var out *pb.AppInfo
	err := c.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.KillApp(ctx, &pb.KillAppRequest{App: app, Reason: reason})
		if err != nil {
			return err
		}
		out = resp.GetApp()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kill %s: %w", app, err)
	}
	return out, nil
}

// isRefused says whether a call failed because nothing listens at the
// address.
func isRefused(err error) bool {
	return status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "connection refused")
}

// isWrongService says whether the address answered gRPC but serves no
// master: a worker's port, or another program's.
func isWrongService(err error) bool {
	return status.Code(err) == codes.Unimplemented && strings.Contains(status.Convert(err).Message(), "unknown service")
}
