// Package pstest starts real parameter servers on loopback for the tests
// of the packages around them (ps/client, ps/proxy), each behind the
// peer-token handshake, and can cut one off at once as a SIGKILL does.
package pstest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

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
}

// Cluster is a set of running servers.
type Cluster struct {
	// Addrs are the servers' addresses, by server index.
	Addrs   []string
	Servers []*server.Server
	kills   []func()
}

// Quiet is a logger that writes nothing.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Start runs o.Servers servers until the test ends.
func Start(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	if o.RingVersion == 0 {
		o.RingVersion = 1
	}
	c := &Cluster{}
	lns := make([]net.Listener, o.Servers)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		lns[i] = ln
		c.Addrs = append(c.Addrs, ln.Addr().String())
	}
	ring, err := ps.NewRing(o.RingVersion, c.Addrs, 0)
	if err != nil {
		tb.Fatal(err)
	}
	creds, err := peercred.New(o.Token, ps.Purpose)
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, ln := range lns {
		s, err := server.New(server.Config{Index: i, Ring: ring, Workers: o.Workers, Staleness: o.Staleness,
			MemoryBytes: o.MemoryBytes, WaitTimeout: o.WaitTimeout, Replicas: o.Replicas, PeerCreds: creds, Logger: Quiet()})
		if err != nil {
			tb.Fatal(err)
		}
		c.Servers = append(c.Servers, s)
		ctx, cancel := context.WithCancel(context.Background())
		kl := &killableListener{Listener: ln}
		c.kills = append(c.kills, func() { kl.kill(); cancel() })
		wg.Go(func() { _ = s.Serve(ctx, kl, creds) })
	}
	tb.Cleanup(func() {
		for _, kill := range c.kills {
			kill()
		}
		wg.Wait()
	})
	return c
}

// Kill cuts server i off at once: its port and every connection close, as
// a killed process's kernel closes them.
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
