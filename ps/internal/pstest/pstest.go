// Package pstest starts real parameter servers on loopback for the tests
// of the packages around them (ps/client, ps/proxy), each behind the
// peer-token handshake, and can cut one off at once as a SIGKILL does.
package pstest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/spindle-ml/spindle/internal/peercred"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/server"
)

// Options describe a cluster. Token is required; the rest default to a
// server config's zero values (ring version 1).
type Options struct {
	Servers, Workers int
	Token            string
	Staleness        ps.Staleness
	MemoryBytes      int64
	WaitTimeout      time.Duration
	RingVersion      uint64
	Replicas         int
	// DataLink is the servers' data link (server.Config.DataLink): "ucx"
	// serves pulls and pushes over UCX too.
	DataLink string
}

// Cluster is a set of running servers.
type Cluster struct {
	// Addrs are the servers' addresses, by server index (a replacement's
	// once it replaced one).
	Addrs   []string
	Servers []*server.Server
	kills   []func()

	opts  Options
	creds credentials.TransportCredentials
	wg    sync.WaitGroup
}

// Quiet is a logger that writes nothing.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Start runs o.Servers servers until the test ends.
func Start(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	if o.RingVersion == 0 {
		o.RingVersion = 1
	}
	c := &Cluster{opts: o}
	lns := make([]net.Listener, o.Servers)
	for i := range lns {
		lns[i] = listen(tb)
		c.Addrs = append(c.Addrs, lns[i].Addr().String())
	}
	ring, err := ps.NewRing(o.RingVersion, c.Addrs, 0)
	if err != nil {
		tb.Fatal(err)
	}
	if c.creds, err = peercred.New(o.Token, ps.Purpose); err != nil {
		tb.Fatal(err)
	}
	for i, ln := range lns {
		s, kill := c.serve(tb, i, ring, ln)
		c.Servers = append(c.Servers, s)
		c.kills = append(c.kills, kill)
	}
	tb.Cleanup(func() {
		for _, kill := range c.kills {
			kill()
		}
		c.wg.Wait()
	})
	c.waitDataLinks(tb)
	return c
}

// waitDataLinks waits until every server's UCX data link is up, when the
// cluster has one: a server starts it as it starts serving, reading
// UCX_TLS then, and a test may change UCX_TLS next for its clients.
func (c *Cluster) waitDataLinks(tb testing.TB) {
	if !strings.HasPrefix(c.opts.DataLink, "ucx") || strings.HasSuffix(c.opts.DataLink, ":declined") {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range c.Servers {
		for s.DataLinkAddress() == nil {
			if time.Now().After(deadline) {
				tb.Fatalf("a server's UCX data link did not start within 10s")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func listen(tb testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

// serve runs server i of ring on ln; kill cuts it off.
func (c *Cluster) serve(tb testing.TB, i int, ring *ps.Ring, ln net.Listener) (*server.Server, func()) {
	o := c.opts
	s, err := server.New(server.Config{Index: i, Ring: ring, Workers: o.Workers, Staleness: o.Staleness,
		MemoryBytes: o.MemoryBytes, WaitTimeout: o.WaitTimeout, Replicas: o.Replicas, PeerCreds: c.creds, DataLink: o.DataLink, Logger: Quiet()})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	kl := &killableListener{Listener: ln}
	c.wg.Go(func() { _ = s.Serve(ctx, kl, c.creds) })
	// The data link closes with the port, as a killed process's would.
	return s, func() { kl.kill(); s.CloseDataLink(); cancel() }
}

// Replace starts a replacement for server i, which must have been killed
// and taken out of the ring, and has it rejoin the ring at a new address,
// as a job's replacement parameter server does.
func (c *Cluster) Replace(tb testing.TB, ctx context.Context, i int) error {
	tb.Helper()
	s := c.StartReplacement(tb, i)
	return s.Join(ctx, c.Addrs[i])
}

// StartReplacement starts serving a replacement for server i at a new
// address (Addrs[i] from then on), without rejoining the ring: the
// caller calls Join.
func (c *Cluster) StartReplacement(tb testing.TB, i int) *server.Server {
	tb.Helper()
	ln := listen(tb)
	addrs := append([]string(nil), c.Addrs...)
	addrs[i] = ln.Addr().String()
	ring, err := ps.NewRing(c.opts.RingVersion, addrs, 0)
	if err != nil {
		tb.Fatal(err)
	}
	s, kill := c.serve(tb, i, ring, ln)
	c.Servers[i], c.Addrs[i], c.kills[i] = s, addrs[i], kill
	return s
}

// Kill cuts server i off at once: its port, every connection and its UCX
// data link close, as a killed process's kernel closes them.
func (c *Cluster) Kill(i int) { c.kills[i]() }

// killableListener remembers the connections it accepted, so that Kill
// can drop them all at once.
type killableListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func (l *killableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns = append(l.conns, c)
	return c, nil
}

func (l *killableListener) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead = true
	l.Listener.Close()
	for _, c := range l.conns {
		c.Close()
	}
}
