package standalone_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/internal/testcluster"
	"github.com/spindle-ml/spindle/standalone/master"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
	"github.com/spindle-ml/spindle/standalone/worker"
)

func TestMain(m *testing.M) {
	testcluster.MaybeRunWorkerProcess()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func newManager(t testing.TB, g *testcluster.Masters, name string, opts ...func(*standalone.ClientConfig)) *standalone.ClusterManager {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	cfg := standalone.ClientConfig{
		Masters: g.Addrs(), Secret: testcluster.Secret, AppName: name, DriverHost: "127.0.0.1",
		HeartbeatInterval: 100 * time.Millisecond, Logger: testcluster.Logger(t),
	}
	for _, o := range opts {
		o(&cfg)
	}
	cm, err := standalone.NewClusterManager(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cm.Close() })
	return cm
}

// specs is a gang of n executors running script under /bin/sh (the test
// workers' executor binary).
func specs(n, cores, memMB int, script string) []driver.ExecutorSpec {
	out := make([]driver.ExecutorSpec, n)
	for i := range out {
		out[i] = driver.ExecutorSpec{ID: fmt.Sprintf("exec-%d", i), Args: []string{"-c", script},
			Env: map[string]string{"SPINDLE_JOB_SECRET": "job-secret"}, Cores: cores, MemoryMB: memMB}
	}
	return out
}

// seen holds events read by nextEvent but not yet asked for, per manager.
var seen = map[driver.ClusterManager][]driver.Event{}

// nextEvent returns the first event of the given kind for id (any id when
// empty), from those already read or the next ones; events it reads past
// are kept for later calls.
func nextEvent(t *testing.T, cm driver.ClusterManager, kind driver.EventKind, id string) driver.Event {
	t.Helper()
	match := func(ev driver.Event) bool { return ev.Kind == kind && (id == "" || ev.ExecutorID == id) }
	for i, ev := range seen[cm] {
		if match(ev) {
			seen[cm] = append(seen[cm][:i:i], seen[cm][i+1:]...)
			return ev
		}
	}
	timeout := time.After(testutil.Scale(30 * time.Second))
	for {
		select {
		case ev := <-cm.Events():
			if match(ev) {
				return ev
			}
			seen[cm] = append(seen[cm], ev)
		case <-timeout:
			t.Fatalf("no %v event for %q within 30s; other events: %+v", kind, id, seen[cm])
		}
	}
}

func TestRequestEventsRelease(t *testing.T) {
	g := testcluster.StartMasters(t, 3, nil)
	testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	testcluster.StartWorker(t, g.Addrs(), "w2", nil)
	g.WaitWorkers(2)
	cm := newManager(t, g, "events")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	// A job whose input is pushed says where: spindle status shows it.
	cm.ShowInput("grpc://10.0.0.5:40129")
	if err := cm.Request(ctx, specs(4, 1, 256, "sleep 60")); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the app's input in status", func() bool {
		var buf bytes.Buffer
		if err := (&client.Status{Cluster: g.Status(ctx)}).WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(buf.String(), "producers push input to grpc://10.0.0.5:40129")
	}))

	started := map[string]string{}
	for len(started) < 4 {
		ev := nextEvent(t, cm, driver.ExecutorStarted, "")
		started[ev.ExecutorID] = ev.Host
	}
	if started["exec-0"] != "127.0.0.1" {
		t.Fatalf("started: %v", started)
	}
	if err := cm.Release(ctx, []string{"exec-0"}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, cm, driver.ExecutorExited, "exec-0")
	if !strings.Contains(ev.Message, "released by the driver") {
		t.Fatalf("exit of a released executor: %+v", ev)
	}
	if err := cm.Close(); err != nil {
		t.Fatal(err)
	}
	// Any master answers status, so wait for the one asked to catch up.
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the app to be finished", func() bool {
		for _, a := range g.Status(ctx).GetApps() {
			if a.GetId() == cm.AppID() {
				return a.GetState() == pb.AppState_APP_STATE_FINISHED
			}
		}
		return false
	}))

	testutil.WaitFor(t, 20*time.Second, testutil.Holds("every executor to stop after Close", func() bool {
		for _, e := range g.Status(ctx).GetExecutors() {
			if e.GetState() == pb.ExecutorState_EXECUTOR_STATE_RUNNING {
				return false
			}
		}
		return true
	}))

}

// Executors' output reaches the driver's console, every line, by the
// time Release returns.
func TestOutputReachesConsole(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	g.WaitWorkers(1)
	var out, errOut syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	cm, err := standalone.NewClusterManager(ctx, standalone.ClientConfig{
		Masters: g.Addrs(), Secret: testcluster.Secret, AppName: "console",
		Console: driver.NewConsole(&out, &errOut, false), Logger: testcluster.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	script := `for i in 1 2 3; do echo "[rank $RANK_HINT] line $i"; done; printf 'no newline'; echo oops >&2`
	sp := specs(2, 1, 64, script)
	for i := range sp {
		sp[i].Env["RANK_HINT"] = fmt.Sprint(i)
	}
	if err := cm.Request(ctx, sp); err != nil {
		t.Fatal(err)
	}
	// Release as soon as the processes ended, as a driver does when the
	// job succeeds, whether or not the watch has shown it yet.
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("both executors to exit", func() bool {
		n := 0
		for _, e := range g.Status(ctx).GetExecutors() {
			if e.GetState() == pb.ExecutorState_EXECUTOR_STATE_EXITED {
				n++
			}
		}
		return n == 2
	}))

	if err := cm.Release(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[rank 0] line 1\n", "[rank 0] line 3\n", "[rank 1] line 2\n", "no newline"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Count(errOut.String(), "oops\n") != 2 {
		t.Errorf("console errors: %q", errOut.String())
	}
}

func TestGangTimeoutSaysWhatIsMissing(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	// 8 cores in all, but split 5 and 3: room for three 2-core executors,
	// not four, so the gang waits and its timeout says what was missing.
	testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.Cores = 5; c.MemoryMB = 4096 })
	testcluster.StartWorker(t, g.Addrs(), "w2", func(c *worker.Config) { c.Cores = 3; c.MemoryMB = 4096 })
	g.WaitWorkers(2)
	// The gang's own timeout is what is tested, so it stays short; the
	// caller's deadline is long: with a deadline of 2 s, the masters had
	// the last 200 ms to answer, which a loaded machine missed.
	cm := newManager(t, g, "too-big", func(c *standalone.ClientConfig) { c.GangTimeout = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	err := cm.Request(ctx, specs(4, 2, 2048, "sleep 60"))
	want := "need 4 executors of 2 cores/2048 MiB, cluster has room for 3: w1 room for 2, w2 room for 1"
	if !errors.Is(err, standalone.ErrNoRoom) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant ErrNoRoom saying %q", err, want)
	}
}

func TestWorkerLostEvent(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	wp := testcluster.StartWorkerProcess(t, g.Addrs(), "w-doomed", 2, 2048)
	g.WaitWorkers(1)
	cm := newManager(t, g, "lost")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	if err := cm.Request(ctx, specs(2, 1, 256, "sleep 60")); err != nil {
		t.Fatal(err)
	}
	wp.Kill()
	ev := nextEvent(t, cm, driver.ExecutorLost, "")
	if ev.Host != "127.0.0.1" || !strings.Contains(ev.Message, "worker w-doomed (host 127.0.0.1) stopped heartbeating") {
		t.Fatalf("lost event: %+v", ev)
	}
}

func TestLeaderFailoverKeepsJob(t *testing.T) {
	g := testcluster.StartMasters(t, 3, nil)
	testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	g.WaitWorkers(1)
	cm := newManager(t, g, "failover")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	gate := filepath.Join(t.TempDir(), "go")
	script := fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.05; done; exit 0`, gate)
	if err := cm.Request(ctx, specs(2, 1, 256, script)); err != nil {
		t.Fatal(err)
	}
	g.Stop(g.Leader())
	g.Leader()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"exec-0", "exec-1"} {
		if ev := nextEvent(t, cm, driver.ExecutorExited, id); ev.ExitCode != 0 {
			t.Fatalf("exit after failover: %+v", ev)
		}
	}
	// New requests go to the new leader.
	more := specs(1, 1, 256, "exit 0")
	more[0].ID = "exec-2"
	if err := cm.Request(ctx, more); err != nil {
		t.Fatalf("request after failover: %v", err)
	}
}

func TestKilledByAdmin(t *testing.T) {
	g := testcluster.StartMasters(t, 1, func(c *master.Config) { c.StopGrace = 500 * time.Millisecond })
	testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	g.WaitWorkers(1)
	cm := newManager(t, g, "victim")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	if err := cm.Request(ctx, specs(1, 1, 256, "sleep 60")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Client().Kill(ctx, cm.AppID(), "maintenance"); err != nil {
		t.Fatal(err)
	}
	// The driver hears why before the executor is stopped.
	ev := nextEvent(t, cm, driver.ExecutorLost, "exec-0")
	if !strings.Contains(ev.Message, cm.AppID()+" killed by an admin (spindle kill): maintenance") {
		t.Fatalf("event: %+v", ev)
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the executor to be stopped", func() bool {
		for _, e := range g.Status(ctx).GetExecutors() {
			if e.GetId() == "exec-0" {
				return e.GetState() == pb.ExecutorState_EXECUTOR_STATE_EXITED
			}
		}
		return false
	}))

	// The ended application takes no more executors.
	more := specs(1, 1, 256, "true")
	more[0].ID = "exec-9"
	if err := cm.Request(ctx, more); !errors.Is(err, standalone.ErrAppEnded) {
		t.Fatalf("request after kill: %v", err)
	}
}

func TestNoMasters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(500*time.Millisecond))
	defer cancel()
	_, err := standalone.NewClusterManager(ctx, standalone.ClientConfig{Masters: []string{testaddr.Refusing(t)}, Secret: testcluster.Secret})
	if err == nil || !strings.Contains(err.Error(), "register application with the standalone masters") {
		t.Fatalf("unreachable masters: %v", err)
	}
	if _, err := standalone.NewClusterManager(ctx, standalone.ClientConfig{}); !errors.Is(err, standalone.ErrConfig) {
		t.Fatalf("no masters: %v", err)
	}
}

// TestRoomIsTheLeaders: Room, which decides whether an elastic job stops
// a generation to grow, counts only on the leader's replica. Any master
// answers ClusterStatus from its own, and under load a follower's lags
// (or replays old states after a restart) and shows room that is gone:
// standalone/e2e TestElasticShrinksWhenAWorkerDies, with its leader
// killed and restarted during the shrink, grew on such a view and stopped
// a generation for nothing. A driver that reaches only a follower hears
// of no room at all.
func TestRoomIsTheLeaders(t *testing.T) {
	g := testcluster.StartMasters(t, 3, nil)
	testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	g.WaitWorkers(1)
	leader := g.Leader()
	follower := (leader + 1) % 3
	spec := driver.ExecutorSpec{Cores: 1, MemoryMB: 256}
	ctx := context.Background()
	cm := newManager(t, g, "room")
	// Wait for every replica to hold the worker, so that the follower's
	// answer, if taken, would be a plausible 4.
	testutil.WaitFor(t, 10*time.Second, func() error {
		room, err := cm.Room(ctx, spec)
		if err != nil || room != 4 {
			return fmt.Errorf("room %d (err %v), want 4 on w1's 4 cores", room, err)
		}
		return nil
	})
	cfg := standalone.ClientConfig{Masters: []string{g.Cfgs[follower].Addr}, Secret: testcluster.Secret, AppName: "room-follower",
		DriverHost: "127.0.0.1", HeartbeatInterval: 100 * time.Millisecond, Logger: testcluster.Logger(t)}
	only, err := standalone.NewClusterManager(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	rctx, cancel := context.WithTimeout(ctx, testutil.Scale(time.Second))
	defer cancel()
	if room, err := only.Room(rctx, spec); err == nil || !strings.Contains(err.Error(), "answered from its replica") {
		t.Errorf("Room through follower %s alone: %d, %v; want the follower's replica refused", g.Cfgs[follower].ID, room, err)
	}
}
