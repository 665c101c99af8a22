package hadooprpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// ErrNoServer reports that no server of a failover group answered.
var ErrNoServer = errors.New("hadooprpc: no server answered")

// FailoverConfig configures a FailoverClient.
type FailoverConfig struct {
	// Addrs are the servers of the group (HA namenodes, ResourceManagers),
	// tried in order starting from the last one that answered.
	Addrs []string
	// Client is the connection template; its Addr is ignored.
	Client ClientConfig
	// Rounds bounds the passes over every address; zero means 3.
	Rounds int
	// Backoff is the wait after a pass in which no server answered; it
	// doubles each pass. Zero means 200ms.
	Backoff time.Duration
}

// FailoverClient makes calls on whichever server of an HA group is active,
// failing over on StandbyException and on broken or refused connections, as
// Hadoop's own HA proxies do. It is shared by the HDFS namenode and the
// YARN ResourceManager clients.
type FailoverClient struct {
	cfg FailoverConfig

	mu   sync.Mutex
	cur  int
	conn *Client
}

// NewFailoverClient returns a client for cfg.Addrs; it connects on the
// first call.
func NewFailoverClient(cfg FailoverConfig) (*FailoverClient, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("hadooprpc: failover group without addresses")
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 200 * time.Millisecond
	}
	return &FailoverClient{cfg: cfg}, nil
}

// Addrs returns the group's addresses.
func (f *FailoverClient) Addrs() []string { return f.cfg.Addrs }

// Current returns the address of the server last used.
func (f *FailoverClient) Current() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg.Addrs[f.cur]
}

// connect returns the open connection, dialing the current server.
func (f *FailoverClient) connect(ctx context.Context) (*Client, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		return f.conn, f.cur, nil
	}
	cc := f.cfg.Client
	cc.Addr = f.cfg.Addrs[f.cur]
	c, err := Dial(ctx, cc)
	if err != nil {
		return nil, f.cur, err
	}
	f.conn = c
	return c, f.cur, nil
}

// next drops the connection to server i and moves to the following one,
// unless another call already did.
func (f *FailoverClient) next(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != i {
		return
	}
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
	f.cur = (f.cur + 1) % len(f.cfg.Addrs)
}

// Call invokes method on the active server. A remote error other than
// StandbyException is returned as is; when no server answers within the
// configured rounds the error wraps ErrNoServer and names every address.
func (f *FailoverClient) Call(ctx context.Context, method string, req, resp proto.Message) error {
	backoff := f.cfg.Backoff
	var last error
	for round := 0; round < f.cfg.Rounds; round++ {
		for range f.cfg.Addrs {
			c, i, err := f.connect(ctx)
			if err == nil {
				err = c.Call(ctx, method, req, resp)
				var re *RemoteError
				if err == nil || (errors.As(err, &re) && re.Class != ClassStandby && !re.Fatal) {
					return err
				}
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", method, ctx.Err())
			}
			last = err
			f.next(i)
		}
		if round == f.cfg.Rounds-1 {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s on %s: %w", method, strings.Join(f.cfg.Addrs, ", "), ctx.Err())
		case <-t.C:
		}
		backoff *= 2
	}
	return fmt.Errorf("%s: %w (tried %s %d times): %w", method, ErrNoServer, strings.Join(f.cfg.Addrs, ", "), f.cfg.Rounds, last)
}

// Close closes the open connection.
func (f *FailoverClient) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
	return nil
}
