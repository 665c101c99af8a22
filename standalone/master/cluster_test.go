package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

const testSecret = "test-cluster-secret-0123456789"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SPINDLE_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(testutil.LogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// fastRaft sets small timeouts so elections take a fraction of a second
// (stretched by SPINDLE_TEST_TIMESCALE). A loaded machine still misses
// them now and then: tests must not assume a leader stays one.
func fastRaft(c *Config) {
	c.HeartbeatTimeout = testutil.Scale(150 * time.Millisecond)
	c.ElectionTimeout = testutil.Scale(150 * time.Millisecond)
	c.LeaderLeaseTimeout = testutil.Scale(75 * time.Millisecond)
	c.CommitTimeout = 10 * time.Millisecond
	c.WorkerTimeout = testutil.Scale(time.Second)
	c.LaunchTimeout = testutil.Scale(5 * time.Second)
	c.StopGrace = testutil.Scale(time.Second)
}

// testGroup is a group of masters running in this process.
type testGroup struct {
	t      *testing.T
	cfgs   []Config
	ms     []*Master
	cancel []context.CancelFunc
	done   []chan error
	inmem  []*raft.InmemTransport
}

// startGroup starts n masters. With inmem set they talk Raft over
// in-memory transports the test can cut; otherwise over TCP.
func startGroup(t *testing.T, n int, inmem bool, mod func(*Config)) *testGroup {
	t.Helper()
	g := &testGroup{t: t, ms: make([]*Master, n), cancel: make([]context.CancelFunc, n), done: make([]chan error, n)}
	var peers []Peer
	var lis, rlis []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		p := Peer{ID: fmt.Sprintf("m%d", i+1), Addr: l.Addr().String()}
		if inmem {
			addr, tr := raft.NewInmemTransport(raft.ServerAddress(p.ID))
			p.RaftAddr = string(addr)
			g.inmem = append(g.inmem, tr)
		} else {
			rl, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			rlis = append(rlis, rl)
			p.RaftAddr = rl.Addr().String()
		}
		peers = append(peers, p)
	}
	for i := range g.inmem {
		for j := range g.inmem {
			if i != j {
				g.inmem[i].Connect(g.inmem[j].LocalAddr(), g.inmem[j])
			}
		}
	}
	for i := 0; i < n; i++ {
		c := DefaultConfig()
		c.ID, c.Addr, c.RaftAddr = peers[i].ID, peers[i].Addr, peers[i].RaftAddr
		c.Peers = peers
		c.DataDir = t.TempDir()
		c.Secret = testSecret
		c.Logger = testLogger(t).With("test_master", peers[i].ID)
		c.Listener = lis[i]
		if inmem {
			c.transport = g.inmem[i]
		} else {
			c.RaftListener = rlis[i]
		}
		fastRaft(&c)
		if mod != nil {
			mod(&c)
		}
		g.cfgs = append(g.cfgs, c)
	}
	for i := range g.cfgs {
		g.start(i)
	}
	t.Cleanup(g.stopAll)
	return g
}

// start runs master i (again, on the same data directory and ports).
func (g *testGroup) start(i int) {
	g.t.Helper()
	c := g.cfgs[i]
	if g.ms[i] != nil || c.Listener == nil {
		var err error
		if c.Listener, err = net.Listen("tcp", c.Addr); err != nil {
			g.t.Fatalf("listen again on %s: %v", c.Addr, err)
		}
		if c.transport == nil {
			if c.RaftListener, err = net.Listen("tcp", c.RaftAddr); err != nil {
				g.t.Fatalf("listen again on %s: %v", c.RaftAddr, err)
			}
		}
	}
	m, err := New(c)
	if err != nil {
		g.t.Fatalf("start master %s: %v", c.ID, err)
	}
	g.cfgs[i].Listener = nil // bind afresh on restart
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	g.ms[i], g.cancel[i], g.done[i] = m, cancel, done
}

// stop stops master i as a crash would look to the others: no leadership
// transfer, its connections just go away.
func (g *testGroup) stop(i int) {
	if g.cancel[i] == nil {
		return
	}
	g.cancel[i]()
	select {
	case err := <-g.done[i]:
		if err != nil {
			g.t.Errorf("master %s: %v", g.cfgs[i].ID, err)
		}
	case <-time.After(testutil.Scale(20 * time.Second)):
		g.t.Errorf("master %s did not stop", g.cfgs[i].ID)
	}
	g.cancel[i] = nil
}

func (g *testGroup) stopAll() {
	for i := range g.ms {
		g.stop(i)
	}
}

func (g *testGroup) running(i int) bool { return g.cancel[i] != nil }

// leader waits until exactly one running master leads and returns it.
func (g *testGroup) leader() int {
	g.t.Helper()
	var idx int
	testutil.WaitFor(g.t, 15*time.Second, testutil.Holds("a leader", func() bool {
		idx = -1
		for i, m := range g.ms {
			if g.running(i) && m.IsLeader() {
				if idx >= 0 {
					return false
				}
				idx = i
			}
		}
		return idx >= 0
	}))

	return idx
}

func (g *testGroup) addrs() []string {
	var out []string
	for _, c := range g.cfgs {
		out = append(out, c.Addr)
	}
	return out
}

func (g *testGroup) client() *client.Client {
	g.t.Helper()
	c, err := client.New(client.Config{Masters: g.addrs(), Secret: testSecret, AttemptTimeout: time.Second, Logger: testLogger(g.t)})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { c.Close() })
	return c
}

// directClient calls master i only.
func (g *testGroup) directClient(i int) *client.Client {
	g.t.Helper()
	c, err := client.New(client.Config{Masters: []string{g.cfgs[i].Addr}, Secret: testSecret, AttemptTimeout: time.Second, Logger: testLogger(g.t)})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { c.Close() })
	return c
}

func registerApp(ctx context.Context, c *client.Client, name string) (string, error) {
	var id string
	err := c.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.RegisterApp(ctx, &pb.RegisterAppRequest{Name: name, RequestId: name})
		if err == nil {
			id = resp.GetAppId()
		}
		return err
	})
	return id, err
}

func appCount(m *Master) (n int) {
	m.fsm.read(func(s *State, _ uint64) { n = len(s.Apps) })
	return n
}

// TestFollowersForwardWrites: a client that only knows a follower gets
// its write done, and any master answers reads from its replica, naming
// the leader. Leadership may move while the test runs (on a loaded
// machine a heartbeat can miss its 150 ms), so the reads are checked
// against the leader of the moment, until they agree.
func TestFollowersForwardWrites(t *testing.T) {
	g := startGroup(t, 3, false, nil)
	f := (g.leader() + 1) % 3
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	id, err := registerApp(ctx, g.directClient(f), "via-follower")
	if err != nil {
		t.Fatalf("write through master %s: %v", g.cfgs[f].ID, err)
	}
	for i, m := range g.ms {
		testutil.WaitFor(t, 5*time.Second, testutil.Holds(fmt.Sprintf("app on %s", g.cfgs[i].ID), func() bool { return appCount(m) == 1 }))
	}
	testutil.WaitFor(t, 10*time.Second, func() error { return followerStatusAgrees(ctx, g, f, id) })
}

// followerStatusAgrees checks master f's answer to a status read, and the
// client's, against the group's leader of the moment.
func followerStatusAgrees(ctx context.Context, g *testGroup, f int, app string) error {
	var resp *pb.ClusterStatusResponse
	if err := g.directClient(f).Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		var err error
		resp, err = m.ClusterStatus(ctx, &pb.ClusterStatusRequest{})
		return err
	}); err != nil {
		return fmt.Errorf("status from %s: %w", g.cfgs[f].ID, err)
	}
	if len(resp.GetApps()) != 1 || resp.GetApps()[0].GetId() != app || resp.GetServedBy().GetId() != g.cfgs[f].ID {
		return fmt.Errorf("status from %s: %v, want app %s served by it", g.cfgs[f].ID, resp, app)
	}
	leader := g.cfgs[g.leader()].ID
	var named []string
	for _, p := range resp.GetMasters() {
		if p.GetLeader() {
			named = append(named, p.GetId())
		}
	}
	if len(named) != 1 || named[0] != leader || len(resp.GetMasters()) != 3 {
		return fmt.Errorf("status from %s names leaders %v among %d masters, want %s among 3", g.cfgs[f].ID, named, len(resp.GetMasters()), leader)
	}
	st, err := g.client().Status(ctx)
	if err != nil {
		return fmt.Errorf("client status: %w", err)
	}
	if st.Leader() != leader {
		return fmt.Errorf("client status names leader %q, want %s", st.Leader(), leader)
	}
	return nil
}

func TestLeaderFailover(t *testing.T) {
	g := startGroup(t, 3, false, nil)
	c := g.client()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	if _, err := registerApp(ctx, c, "before"); err != nil {
		t.Fatal(err)
	}
	old := g.leader()
	killed := time.Now()
	g.stop(old)
	// A client given every master never learns who leads: its next write
	// just succeeds once the others elected a leader.
	if _, err := registerApp(ctx, c, "after"); err != nil {
		t.Fatalf("write after the leader died: %v", err)
	}
	t.Logf("first write %s after the leader stopped (election timeout %s)", time.Since(killed).Round(time.Millisecond), g.cfgs[0].ElectionTimeout)
	nl := g.leader()
	if nl == old {
		t.Fatal("stopped master still leads")
	}
	if n := appCount(g.ms[nl]); n != 2 {
		t.Fatalf("new leader has %d apps, want 2", n)
	}
	// The old leader comes back as a follower and catches up.
	g.start(old)
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("old leader to catch up", func() bool { return appCount(g.ms[old]) == 2 }))
}

func TestRestartKeepsState(t *testing.T) {
	g := startGroup(t, 3, false, func(c *Config) {
		c.SnapshotThreshold = 4 // snapshot and compact the log early
		c.TrailingLogs = 2
		c.SnapshotInterval = 50 * time.Millisecond
	})
	c := g.client()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	for i := 0; i < 12; i++ {
		if _, err := registerApp(ctx, c, fmt.Sprintf("app-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	l := g.leader()
	if err := g.ms[l].Snapshot(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("every master to snapshot and compact its log", func() bool {
		for _, m := range g.ms {
			first, err := m.store.FirstIndex()
			if err != nil || first <= 1 || m.info().GetLastSnapshotIndex() == 0 || appCount(m) != 12 {
				return false
			}
		}
		return true
	}))

	before := stateJSON(t, g.ms[l].fsm)
	g.stopAll()
	for i := range g.ms {
		g.start(i)
	}
	g.leader()
	for i, m := range g.ms {
		testutil.WaitFor(t, 10*time.Second, testutil.Holds("state restored on "+g.cfgs[i].ID, func() bool { return appCount(m) == 12 }))
	}
	if after := stateJSON(t, g.ms[g.leader()].fsm); string(after) != string(before) {
		t.Fatalf("state after restart differs:\nbefore %s\nafter  %s", before, after)
	}
	// And the group goes on taking writes.
	if _, err := registerApp(ctx, c, "after-restart"); err != nil {
		t.Fatal(err)
	}
}

func TestPartitionedLeader(t *testing.T) {
	g := startGroup(t, 3, true, nil)
	old := g.leader()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	if _, err := registerApp(ctx, g.client(), "before"); err != nil {
		t.Fatal(err)
	}
	// Cut the leader off from both followers.
	for i, tr := range g.inmem {
		if i != old {
			tr.Disconnect(g.inmem[old].LocalAddr())
			g.inmem[old].Disconnect(tr.LocalAddr())
		}
	}
	// The majority elects a new leader... (The waits are long: with its
	// timeouts of 150 ms, a group starved for seconds at a time on a busy
	// machine, as under the race detector beside a second make test,
	// churns through elections before it settles.)
	var nl int
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("a leader in the majority", func() bool {
		for i, m := range g.ms {
			if i != old && m.IsLeader() {
				nl = i
				return true
			}
		}
		return false
	}))

	// ...the old one steps down once its lease runs out, and writes sent to
	// it alone fail instead of being lost or split-brained.
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("step-down of the partitioned leader", func() bool { return !g.ms[old].IsLeader() }))
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err := registerApp(short, g.directClient(old), "minority")
	cancelShort()
	if err == nil {
		t.Fatal("a write on the minority side succeeded")
	}
	// Writes on the majority side succeed.
	var majority []string
	for i := range g.ms {
		if i != old {
			majority = append(majority, g.cfgs[i].Addr)
		}
	}
	mc, err := client.New(client.Config{Masters: majority, Secret: testSecret, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if _, err := registerApp(ctx, mc, "majority"); err != nil {
		t.Fatalf("write on the majority side: %v", err)
	}
	// Heal: the old leader follows the new one and converges.
	for i, tr := range g.inmem {
		if i != old {
			tr.Connect(g.inmem[old].LocalAddr(), g.inmem[old])
			g.inmem[old].Connect(tr.LocalAddr(), tr)
		}
	}
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("convergence of the old leader", func() bool { return appCount(g.ms[old]) == 2 }))
	if a, b := stateJSON(t, g.ms[old].fsm), stateJSON(t, g.ms[nl].fsm); string(a) != string(b) {
		t.Fatalf("replicas differ after healing:\n%s\n%s", a, b)
	}
}

func TestRaftTransportNeedsSecret(t *testing.T) {
	g := startGroup(t, 1, false, nil)
	g.leader()
	target := raft.ServerAddress(g.cfgs[0].RaftAddr)
	for _, tc := range []struct {
		name   string
		secret string
		ok     bool
	}{
		{"right secret", testSecret, true},
		{"wrong secret", "another-secret-of-enough-length", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s, err := newStreamLayer(ln, ln.Addr().String(), []byte(tc.secret), nil, nil, DefaultRaftHandshakeTimeout, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			conn, err := s.Dial(target, time.Second)
			if tc.ok {
				if err != nil {
					t.Fatalf("dial with the right secret: %v", err)
				}
				conn.Close()
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("handshake with a wrong secret succeeded")
			}
			if !errors.Is(err, errRaftAuth) {
				t.Fatalf("wrong secret: %v, want errRaftAuth", err)
			}
		})
	}
	// A raw client that does not speak the handshake gets nothing.
	conn, err := net.DialTimeout("tcp", string(target), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	_ = conn.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
	if n, err := conn.Read(make([]byte, 64)); err == nil {
		t.Fatalf("unauthenticated peer got %d bytes back", n)
	}
}

func TestWrongSecretRefused(t *testing.T) {
	g := startGroup(t, 1, false, nil)
	g.leader()
	c, err := client.New(client.Config{Masters: g.addrs(), Secret: "not-the-cluster-secret-at-all", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	_, err = registerApp(ctx, c, "intruder")
	if err == nil || apierr.Retryable(err) || ctx.Err() != nil {
		t.Fatalf("wrong secret: %v; want an immediate authentication error", err)
	}
	if appCount(g.ms[0]) != 0 {
		t.Fatal("an unauthenticated call changed the state")
	}
}

func TestConfigErrors(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.ID, c.DataDir, c.Secret = "m1", t.TempDir(), testSecret
		return c
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no id", func(c *Config) { c.ID = "" }, "no master id"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "no data directory"},
		{"not a peer", func(c *Config) { c.Peers = []Peer{{ID: "m2", RaftAddr: "a:1", Addr: "a:2"}} }, `"m1" is not among the peers`},
		{"lease too long", func(c *Config) { c.LeaderLeaseTimeout = 2 * time.Second }, "leader lease timeout"},
		{"heartbeat raised alone", func(c *Config) { c.HeartbeatTimeout = time.Second }, "raise spindle.master.raft.electionTimeout"},
		{"bad placement", func(c *Config) { c.Placement = "random" }, `placement "random"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	c := base()
	c.Secret = "short"
	if _, err := New(c); err == nil || !contains(err.Error(), "secret") {
		t.Fatalf("short secret: %v", err)
	}
	for _, bad := range []string{"m1", "m1=a:1", "m1=a:1@", "m1=a@b:2", "m1=a:1@b:2,m1=c:3@d:4"} {
		if _, err := ParsePeers(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParsePeers(%q): %v", bad, err)
		}
	}
	ps, err := ParsePeers("m1=127.0.0.1:7001@127.0.0.1:7077, m2=h2:7001@h2:7077")
	if err != nil || len(ps) != 2 || ps[1] != (Peer{ID: "m2", RaftAddr: "h2:7001", Addr: "h2:7077"}) {
		t.Fatalf("ParsePeers: %v %v", ps, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
