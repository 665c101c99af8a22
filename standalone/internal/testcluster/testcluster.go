package testcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/master"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
	"github.com/spindle-ml/spindle/standalone/worker"
)

// Secret is the cluster secret of test clusters.
const Secret = "testcluster-secret-0123456789abcdef"

// Logger logs warnings through t (everything with SPINDLE_TEST_VERBOSE set).
func Logger(t testing.TB) *slog.Logger {
	if os.Getenv("SPINDLE_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if _, ok := t.(*testing.B); ok {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(testutil.LogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// FastRaft sets Raft timeouts small enough for elections to take a
// fraction of a second on loopback: the product's defaults (a lease
// shorter than them made leaders step down and elections flap on a
// loaded machine), stretched by the test timescale, as are the
// worker and launch timeouts (a worker silent for 1.3 s on a loaded
// machine was lost). Failover timing tests that claim the defaults set
// them after this.
func FastRaft(c *master.Config) {
	d := master.DefaultConfig()
	c.HeartbeatTimeout = testutil.Scale(d.HeartbeatTimeout)
	c.ElectionTimeout = testutil.Scale(d.ElectionTimeout)
	c.LeaderLeaseTimeout = testutil.Scale(d.LeaderLeaseTimeout)
	c.CommitTimeout = 10 * time.Millisecond
	// The worker timeout outlasts one heartbeat call's own bound (2 s,
	// the worker's AttemptTimeout): a single slow call to a starved
	// master must not lose a worker (at 1.7 s, under the race detector
	// beside a second make test, it did). It stays shorter than the gone
	// timeout, scaled by the same load: tests of a killed worker expect
	// the silence, not the closed connection, to tell.
	c.WorkerTimeout = testutil.Scale(3 * time.Second)
	c.WorkerGoneTimeout = 2 * c.WorkerTimeout
	c.LaunchTimeout = testutil.Scale(10 * time.Second)
	c.StopGrace = time.Second
}

// Masters is a running group of masters.
type Masters struct {
	t      testing.TB
	cl     *client.Client
	Cfgs   []master.Config
	Ms     []*master.Master
	cancel []context.CancelFunc
	done   []chan error
}

// StartMasters starts n masters; mod adjusts each one's configuration.
func StartMasters(t testing.TB, n int, mod func(*master.Config)) *Masters {
	t.Helper()
	g := &Masters{t: t, Ms: make([]*master.Master, n), cancel: make([]context.CancelFunc, n), done: make([]chan error, n)}
	var peers []master.Peer
	for i := 0; i < n; i++ {
		peers = append(peers, master.Peer{ID: fmt.Sprintf("m%d", i+1), Addr: testaddr.Free(t), RaftAddr: testaddr.Free(t)})
	}
	for i := 0; i < n; i++ {
		c := master.DefaultConfig()
		c.ID, c.Addr, c.RaftAddr, c.Peers = peers[i].ID, peers[i].Addr, peers[i].RaftAddr, peers
		c.DataDir = t.TempDir()
		c.Secret = Secret
		c.Logger = Logger(t).With("test_master", c.ID)
		FastRaft(&c)
		if mod != nil {
			mod(&c)
		}
		g.Cfgs = append(g.Cfgs, c)
	}
	for i := range g.Cfgs {
		g.Start(i)
	}
	t.Cleanup(g.StopAll)
	return g
}

// Start runs master i, again on its data directory after a Stop.
func (g *Masters) Start(i int) {
	g.t.Helper()
	var m *master.Master
	var err error
	// A restarted master rebinds its port, which may linger a moment in
	// the old one's teardown, so retry briefly.
	budget := testutil.NewBudget(5 * time.Second)
	for {
		if m, err = master.New(g.Cfgs[i]); err == nil || budget.Spent() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		g.t.Fatalf("start master %s: %v", g.Cfgs[i].ID, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	g.Ms[i], g.cancel[i], g.done[i] = m, cancel, done
}

// Stop stops master i (no leadership transfer: to the others it looks
// like a crash).
func (g *Masters) Stop(i int) {
	if g.cancel[i] == nil {
		return
	}
	g.cancel[i]()
	deadline := testutil.NewTimer(30 * time.Second)
	defer deadline.Stop()
	select {
	case err := <-g.done[i]:
		if err != nil {
			g.t.Errorf("master %s: %v", g.Cfgs[i].ID, err)
		}
	case <-deadline.C:
		g.t.Errorf("master %s did not stop within %s", g.Cfgs[i].ID, deadline)
	}
	g.cancel[i] = nil
}

// StopAll stops every master.
func (g *Masters) StopAll() {
	for i := range g.Ms {
		g.Stop(i)
	}
}

// Running says whether master i runs.
func (g *Masters) Running(i int) bool { return g.cancel[i] != nil }

// Leader waits until one running master leads and returns its index.
func (g *Masters) Leader() int {
	g.t.Helper()
	idx := -1
	testutil.WaitFor(g.t, 15*time.Second, testutil.Holds("a leader", func() bool {
		for i, m := range g.Ms {
			if g.Running(i) && m.IsLeader() {
				idx = i
				return true
			}
		}
		return false
	}))

	return idx
}

// Addrs returns every master's gRPC address.
func (g *Masters) Addrs() []string {
	out := make([]string, len(g.Cfgs))
	for i, c := range g.Cfgs {
		out[i] = c.Addr
	}
	return out
}

// Client returns a client of every master, closed with the test.
func (g *Masters) Client() *client.Client {
	g.t.Helper()
	c, err := client.New(client.Config{Masters: g.Addrs(), Secret: Secret, AttemptTimeout: 2 * time.Second, Logger: Logger(g.t)})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { c.Close() })
	return c
}

// Status returns the cluster state from any master.
func (g *Masters) Status(ctx context.Context) *pb.ClusterStatusResponse {
	g.t.Helper()
	if g.cl == nil {
		g.cl = g.Client()
	}
	var out *pb.ClusterStatusResponse
	err := g.cl.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		var err error
		out, err = m.ClusterStatus(ctx, &pb.ClusterStatusRequest{})
		return err
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return out
}

// Worker is a worker running in the test process.
type Worker struct {
	W      *worker.Worker
	cancel context.CancelFunc
	done   chan error
}

// StartWorker starts a worker of the masters at addrs; mod adjusts its
// configuration. By default it offers 4 cores, 4 GiB and no GPUs, runs
// /bin/sh as the executor binary and works in a fresh directory.
func StartWorker(t testing.TB, addrs []string, id string, mod func(*worker.Config)) *Worker {
	t.Helper()
	c := worker.DefaultConfig()
	c.ID = id
	c.Masters = addrs
	c.Secret = Secret
	c.Addr = "127.0.0.1:0"
	c.Cores, c.MemoryMB, c.GPUs = 4, 4096, 0
	c.Binary = "/bin/sh"
	c.WorkDir = t.TempDir()
	c.HeartbeatInterval = 100 * time.Millisecond
	c.StopGrace = time.Second
	c.Logger = Logger(t).With("test_worker", id)
	// A worker with cgroups moves its own process, here the test's, into
	// a cgroup of its own: not something a test process should do.
	c.DisableCgroups = true
	if mod != nil {
		mod(&c)
	}
	w, err := worker.New(c)
	if err != nil {
		t.Fatalf("start worker %s: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &Worker{W: w, cancel: cancel, done: make(chan error, 1)}
	go func() { tw.done <- w.Run(ctx) }()
	t.Cleanup(func() { tw.Stop(t) })
	return tw
}

// Stop shuts the worker down (its executors are stopped).
func (w *Worker) Stop(t testing.TB) {
	if w.cancel == nil {
		return
	}
	w.cancel()
	deadline := testutil.NewTimer(30 * time.Second)
	defer deadline.Stop()
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker %s: %v", w.W.ID(), err)
		}
	case <-deadline.C:
		t.Errorf("worker %s did not stop within %s", w.W.ID(), deadline)
	}
	_ = w.W.Close()
	w.cancel = nil
}

// WaitWorkers waits until n workers are registered and alive.
func (g *Masters) WaitWorkers(n int) {
	g.t.Helper()
	testutil.WaitFor(g.t, 15*time.Second, testutil.Holds(fmt.Sprintf("%d alive workers", n), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		alive := 0
		for _, w := range g.Status(ctx).GetWorkers() {
			if w.GetAlive() {
				alive++
			}
		}
		return alive == n
	}))

}
