package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
	"github.com/spindle-ml/spindle/standalone/internal/testcluster"
	"github.com/spindle-ml/spindle/standalone/master"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
	"github.com/spindle-ml/spindle/standalone/worker"
)

func TestMain(m *testing.M) {
	testcluster.MaybeRunWorkerProcess()
	goleak.VerifyTestMain(m)
}

// app registers an application and returns its id.
func app(t *testing.T, c *client.Client, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	var id string
	err := c.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.RegisterApp(ctx, &pb.RegisterAppRequest{Name: name, RequestId: name + t.Name()})
		id = resp.GetAppId()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// shells is a gang of n executors running script under /bin/sh.
func shells(n, cores int, memMB int64, gpus int, script string) []*pb.ExecutorRequest {
	out := make([]*pb.ExecutorRequest, n)
	for i := range out {
		out[i] = &pb.ExecutorRequest{Id: fmt.Sprintf("exec-%d", i), Args: []string{"-c", script},
			Cores: int32(cores), MemoryMb: memMB, Gpus: int32(gpus), Env: map[string]string{"RANK_HINT": fmt.Sprint(i)}}
	}
	return out
}

func request(ctx context.Context, c *client.Client, appID string, timeout time.Duration, es []*pb.ExecutorRequest) ([]*pb.ExecutorInfo, error) {
	return send(ctx, c, &pb.RequestExecutorsRequest{AppId: appID, RequestId: fmt.Sprintf("%s-%d", appID, time.Now().UnixNano()),
		Executors: es, TimeoutMs: timeout.Milliseconds()})
}

// send asks for a gang with req as it is; sending it again is a retry.
func send(ctx context.Context, c *client.Client, req *pb.RequestExecutorsRequest) ([]*pb.ExecutorInfo, error) {
	var out []*pb.ExecutorInfo
	err := c.Call(ctx, true, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.RequestExecutors(ctx, req)
		out = resp.GetExecutors()
		return err
	})
	return out, err
}

// executors returns the executors of appID by id.
func executors(t *testing.T, g *testcluster.Masters, appID string) map[string]*pb.ExecutorInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	out := map[string]*pb.ExecutorInfo{}
	for _, e := range g.Status(ctx).GetExecutors() {
		if e.GetAppId() == appID {
			out[e.GetId()] = e
		}
	}
	return out
}

func waitState(t *testing.T, g *testcluster.Masters, appID, id string, want pb.ExecutorState) *pb.ExecutorInfo {
	t.Helper()
	var e *pb.ExecutorInfo
	testutil.WaitFor(t, 20*time.Second, testutil.Holds(fmt.Sprintf("%s of %s to be %v", id, appID, want), func() bool {
		e = executors(t, g, appID)[id]
		return e.GetState() == want
	}))

	return e
}

func readLog(t *testing.T, addr, workerID, appID, execID, stream string) string {
	t.Helper()
	conn := dialWorker(t, addr, testcluster.Secret)
	resp, err := pb.NewWorkerClient(conn).ReadLog(context.Background(), &pb.ReadLogRequest{AppId: appID, ExecutorId: execID, Stream: stream})
	if err != nil {
		t.Fatalf("read %s of %s: %v", stream, execID, err)
	}
	return string(resp.GetData())
}

// dialWorker dials the worker at addr signing with secret ("": no
// token), as masters do: tokens bound to that worker.
func dialWorker(t *testing.T, addr, secret string) *grpc.ClientConn {
	return dialAs(t, addr, secret, secure.WorkerAudience(addr))
}

// dialAs dials addr signing with secret for audience.
func dialAs(t *testing.T, addr, secret, audience string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if secret != "" {
		s, err := auth.NewSigner(secret)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, s.For(audience).DialOptions()...)
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestLaunchAndExit(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	w := testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	g.WaitWorkers(1)
	c := g.Client()
	id := app(t, c, "exits")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	infos, err := request(ctx, c, id, 10*time.Second, shells(2, 1, 64, 0,
		`echo "hello from $RANK_HINT in $SPINDLE_APP_ID"; echo oops >&2; exit 3`))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].GetWorkerId() != "w1" {
		t.Fatalf("placed: %v", infos)
	}
	e := waitState(t, g, id, "exec-1", pb.ExecutorState_EXECUTOR_STATE_EXITED)
	if e.GetExitCode() != 3 || !strings.Contains(e.GetMessage(), "worker w1") || !strings.Contains(e.GetMessage(), "oops") {
		t.Fatalf("exit of exec-1: code %d, message %q", e.GetExitCode(), e.GetMessage())
	}
	if out := readLog(t, w.W.Addr(), "w1", id, "exec-1", "stdout"); out != "hello from 1 in "+id+"\n" {
		t.Fatalf("stdout of exec-1: %q", out)
	}
}

// An unauthenticated caller (no credentials, or a wrong secret) gets
// nothing launched; the masters' own launches still work.
func TestUnauthenticatedLaunchRefused(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	w := testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	g.WaitWorkers(1)
	// A master stops the executors of apps it does not know at the
	// worker's next heartbeat; the launches here are of a made-up app, and
	// under load the authenticated one could be stopped before its
	// process ran. The worker serves Launch without its master.
	g.StopAll()
	dir := t.TempDir()
	launch := func(secret, audience, marker string) error {
		_, err := pb.NewWorkerClient(dialAs(t, w.W.Addr(), secret, audience)).Launch(context.Background(), &pb.LaunchRequest{
			WorkerId: "w1", AppId: "intruder", ExecutorId: "x-" + marker,
			Args: []string{"-c", "touch " + filepath.Join(dir, marker)}, Cores: 1, MemoryMb: 1,
		})
		return err
	}
	own := secure.WorkerAudience(w.W.Addr())
	for _, tc := range []struct{ name, secret, audience string }{
		{"no credentials", "", own},
		{"wrong secret", "a-wrong-secret-of-good-length", own},
		// A Launch signed for another worker (captured on the wire).
		{"token for another worker", testcluster.Secret, secure.WorkerAudience("10.0.0.9:7078")},
		{"token for no worker", testcluster.Secret, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := launch(tc.secret, tc.audience, "pwned")
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("launch: %v, want Unauthenticated", err)
			}
		})
	}
	// The right secret launches; by the time that process has run, the
	// refused ones would have too.
	if err := launch(testcluster.Secret, own, "legit"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("marker of the authenticated launch", func() bool {
		_, err := os.Stat(filepath.Join(dir, "legit"))
		return err == nil
	}))

	if _, err := os.Stat(filepath.Join(dir, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unauthenticated launch ran: %v", err)
	}
}

func TestLaunchValidation(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	w := testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.GPUs = 1 })
	wc := pb.NewWorkerClient(dialWorker(t, w.W.Addr(), testcluster.Secret))
	tests := []struct {
		name string
		req  *pb.LaunchRequest
		want error
	}{
		{"other worker", &pb.LaunchRequest{WorkerId: "w2", AppId: "a", ExecutorId: "e", Args: []string{"-c", "true"}}, apierr.ErrWrongWorker},
		{"path in app id", &pb.LaunchRequest{WorkerId: "w1", AppId: "../etc", ExecutorId: "e", Args: []string{"-c", "true"}}, apierr.ErrBadRequest},
		{"path in executor id", &pb.LaunchRequest{WorkerId: "w1", AppId: "a", ExecutorId: "a/b", Args: []string{"-c", "true"}}, apierr.ErrBadRequest},
		{"no args", &pb.LaunchRequest{WorkerId: "w1", AppId: "a", ExecutorId: "e"}, apierr.ErrBadRequest},
		{"gpu out of range", &pb.LaunchRequest{WorkerId: "w1", AppId: "a", ExecutorId: "e", Args: []string{"-c", "true"}, Gpus: []int32{1}}, apierr.ErrBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wc.Launch(context.Background(), tc.req)
			if !errors.Is(apierr.FromStatus(err), tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestGangAllOrNothing(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.Cores = 3 })
	// 6 cores in all, yet no room for a third 2-core executor: the gang
	// waits, and its timeout says what was missing.
	testcluster.StartWorker(t, g.Addrs(), "w2", func(c *worker.Config) { c.Cores = 3 })
	g.WaitWorkers(2)
	c := g.Client()
	id := app(t, c, "big")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	_, err := request(ctx, c, id, 500*time.Millisecond, shells(3, 2, 2048, 0, "sleep 30"))
	want := "need 3 executors of 2 cores/2048 MiB, cluster has room for 2: w1 room for 1, w2 room for 1"
	if !errors.Is(err, apierr.ErrNoRoom) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant an ErrNoRoom saying %q", err, want)
	}
	if got := executors(t, g, id); len(got) != 0 {
		t.Fatalf("a refused gang left executors behind: %v", got)
	}
	// Caps are checked before waiting.
	g2 := testcluster.StartMasters(t, 1, func(c *master.Config) { c.MaxExecutorsPerApp = 2 })
	c2 := g2.Client()
	_, err = request(ctx, c2, app(t, c2, "capped"), time.Second, shells(3, 1, 1, 0, "true"))
	if !errors.Is(err, apierr.ErrOverCap) {
		t.Fatalf("over the cap: %v", err)
	}
}

// Gangs are served first come, first served: a small gang that fits now
// waits behind a big one that does not, until the big one is placed.
func TestFIFO(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.Cores = 2 })
	testcluster.StartWorker(t, g.Addrs(), "w2", func(c *worker.Config) { c.Cores = 2 })
	g.WaitWorkers(2)
	c := g.Client()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	a, b, small := app(t, c, "a"), app(t, c, "b"), app(t, c, "small")
	if _, err := request(ctx, c, a, 5*time.Second, shells(1, 2, 64, 0, "sleep 60")); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() {
		_, err := request(ctx, c, b, 30*time.Second, shells(2, 2, 64, 0, "sleep 60"))
		bDone <- err
	}()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("b to queue", func() bool { return queued(t, g) == 1 }))
	// One core would fit on w2 right now, but b is ahead.
	_, err := request(ctx, c, small, 300*time.Millisecond, shells(1, 1, 64, 0, "sleep 60"))
	if !errors.Is(err, apierr.ErrNoRoom) {
		t.Fatalf("small gang jumped the queue: %v", err)
	}
	if err := release(ctx, c, a); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatalf("b after a released: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("b was never placed")
	}
	for _, id := range []string{a, b, small} {
		if err := release(ctx, c, id); err != nil {
			t.Fatal(err)
		}
	}
}

func queued(t *testing.T, g *testcluster.Masters) int {
	addr := g.Cfgs[g.Leader()].Addr
	conn := dialAs(t, addr, testcluster.Secret, secure.MasterAudience(addr))
	info, err := pb.NewMasterClient(conn).MasterInfo(context.Background(), &pb.MasterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return int(info.GetQueuedGangs())
}

func release(ctx context.Context, c *client.Client, appID string) error {
	return c.Call(ctx, true, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.ReleaseExecutors(ctx, &pb.ReleaseExecutorsRequest{AppId: appID})
		return err
	})
}

func TestReleaseAndKill(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	w := testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.CleanupDelay = 0 })
	g.WaitWorkers(1)
	c := g.Client()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	// Released executors are gone when Release returns; a process that
	// ignores SIGTERM is killed after the grace period.
	rel := app(t, c, "released")
	if _, err := request(ctx, c, rel, 5*time.Second, shells(2, 1, 64, 0, `trap "" TERM; sleep 60 & wait; sleep 60`)); err != nil {
		t.Fatal(err)
	}
	if err := release(ctx, c, rel); err != nil {
		t.Fatal(err)
	}
	for id, e := range executors(t, g, rel) {
		if e.GetState() != pb.ExecutorState_EXECUTOR_STATE_EXITED || !strings.Contains(e.GetMessage(), "released by the driver") {
			t.Fatalf("%s after release: %v %q", id, e.GetState(), e.GetMessage())
		}
	}
	// spindle kill by name stops the application's executors and its
	// directory is cleaned up.
	killed := app(t, c, "doomed")
	if _, err := request(ctx, c, killed, 5*time.Second, shells(1, 1, 64, 0, "sleep 60")); err != nil {
		t.Fatal(err)
	}
	info, err := c.Kill(ctx, "doomed", "testing")
	if err != nil || info.GetState() != pb.AppState_APP_STATE_KILLED {
		t.Fatalf("kill: %v %v", info, err)
	}
	e := waitState(t, g, killed, "exec-0", pb.ExecutorState_EXECUTOR_STATE_EXITED)
	if !strings.Contains(e.GetMessage(), "killed by an admin (spindle kill): testing") || e.GetExitCode() != -1 {
		t.Fatalf("killed executor: %d %q", e.GetExitCode(), e.GetMessage())
	}
	dir := filepath.Join(workDir(t, w), killed)
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the killed app's directory to go", func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist)
	}))

	if _, err := c.Kill(ctx, "no-such-app", ""); !errors.Is(err, apierr.ErrUnknownApp) {
		t.Fatalf("kill unknown: %v", err)
	}
}

func workDir(t *testing.T, w *testcluster.Worker) string {
	t.Helper()
	return w.W.WorkDir()
}

// Each executor sees only its GPUs; the worker's secret does not leak into
// executors, the driver's environment does.
func TestExecutorEnvironment(t *testing.T) {
	t.Setenv("SPINDLE_CLUSTER_SECRET", "worker-secret-must-not-leak-0123")
	t.Setenv("CUDA_VISIBLE_DEVICES", "7")
	g := testcluster.StartMasters(t, 1, nil)
	w := testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.GPUs = 2 })
	g.WaitWorkers(1)
	c := g.Client()
	id := app(t, c, "gpus")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	es := shells(3, 1, 64, 1, `echo "gpus=$CUDA_VISIBLE_DEVICES secret=$SPINDLE_CLUSTER_SECRET hint=$RANK_HINT"`)
	es[2].Gpus = 0
	if _, err := request(ctx, c, id, 5*time.Second, es); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i := 0; i < 3; i++ {
		waitState(t, g, id, fmt.Sprintf("exec-%d", i), pb.ExecutorState_EXECUTOR_STATE_EXITED)
		got[strings.TrimSpace(readLog(t, w.W.Addr(), "w1", id, fmt.Sprintf("exec-%d", i), "stdout"))] = true
	}
	for _, want := range []string{"gpus=0 secret= hint=0", "gpus=1 secret= hint=1", "gpus= secret= hint=2"} {
		if !got[want] {
			t.Errorf("no executor printed %q; got %v", want, got)
		}
	}
}

// A worker that dies (SIGKILL) is declared lost within the worker timeout
// and its executors with it, naming the worker and host.
func TestWorkerLost(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	wp := testcluster.StartWorkerProcess(t, g.Addrs(), "w-doomed", 2, 1024)
	g.WaitWorkers(1)
	c := g.Client()
	id := app(t, c, "lost")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	if _, err := request(ctx, c, id, 5*time.Second, shells(2, 1, 64, 0, "sleep 60")); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	wp.Kill()
	e := waitState(t, g, id, "exec-0", pb.ExecutorState_EXECUTOR_STATE_LOST)
	t.Logf("executor lost %s after the worker was killed (worker timeout %s)", time.Since(killed).Round(time.Millisecond), g.Cfgs[0].WorkerTimeout)
	if !strings.Contains(e.GetMessage(), "worker w-doomed (host 127.0.0.1) stopped heartbeating") {
		t.Fatalf("lost message: %q", e.GetMessage())
	}
}

// failoverGroup starts three masters, so a leader can be stopped, and
// worker w1, and registers an application called name.
func failoverGroup(t *testing.T, name string) (*testcluster.Masters, *client.Client, string) {
	t.Helper()
	g := testcluster.StartMasters(t, 3, nil)
	testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	g.WaitWorkers(1)
	c := g.Client()
	return g, c, app(t, c, name)
}

// A worker keeps its executors through a leader failover and reports
// their exits to the new leader.
func TestWorkerFollowsNewLeader(t *testing.T) {
	g, c, id := failoverGroup(t, "failover")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	script := fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.05; done; exit 5`, gate)
	if _, err := request(ctx, c, id, 5*time.Second, shells(1, 1, 64, 0, script)); err != nil {
		t.Fatal(err)
	}
	g.Stop(g.Leader())
	nl := g.Leader()
	// Replicas answer reads, so wait for the one asked to catch up.
	waitState(t, g, id, "exec-0", pb.ExecutorState_EXECUTOR_STATE_RUNNING)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := waitState(t, g, id, "exec-0", pb.ExecutorState_EXECUTOR_STATE_EXITED)
	if e.GetExitCode() != 5 {
		t.Fatalf("exit recorded by the new leader %s: %v", g.Cfgs[nl].ID, e)
	}
	// The worker is still alive for the new leader.
	g.WaitWorkers(1)
}

// A gang request that a leader launched but lost its term before
// answering is retried by the client on the new leader; an executor that
// already ran to its end by then is part of a started gang, not a failed
// launch. (Under load, elections during TestMutualTLS made its "exit 0"
// gang fail with "exited before the gang started".)
func TestGangRetriedOnNewLeaderAfterExecutorExited(t *testing.T) {
	g, c, id := failoverGroup(t, "retried")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	req := &pb.RequestExecutorsRequest{AppId: id, RequestId: "gang-1", Executors: shells(1, 1, 64, 0, "exit 0"),
		TimeoutMs: (5 * time.Second).Milliseconds()}
	if _, err := send(ctx, c, req); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, id, "exec-0", pb.ExecutorState_EXECUTOR_STATE_EXITED)
	g.Stop(g.Leader())
	nl := g.Leader()
	got, err := send(ctx, c, req)
	if err != nil {
		t.Fatalf("retry of the gang on the new leader %s: %v", g.Cfgs[nl].ID, err)
	}
	if len(got) != 1 || got[0].GetState() != pb.ExecutorState_EXECUTOR_STATE_EXITED || got[0].GetExitCode() != 0 {
		t.Fatalf("retry answered %v, want exec-0 exited with status 0", got)
	}
}

// With certificates configured, masters, workers and clients talk mutual
// TLS (gRPC and Raft); a client without a certificate gets nowhere even
// with the right secret.
func TestMutualTLS(t *testing.T) {
	files := testcluster.WriteTLSFiles(t)
	g := testcluster.StartMasters(t, 3, func(c *master.Config) { c.TLS = files })
	testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.TLS = files })
	c, err := client.New(client.Config{Masters: g.Addrs(), Secret: testcluster.Secret, TLS: files})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	testutil.WaitFor(t, 15*time.Second, testutil.Holds("the worker over TLS", func() bool {
		st, err := c.Status(ctx)
		return err == nil && len(st.Cluster.GetWorkers()) == 1 && st.Cluster.GetWorkers()[0].GetAlive()
	}))

	id := app(t, c, "tls")
	if _, err := request(ctx, c, id, 5*time.Second, shells(1, 1, 64, 0, "exit 0")); err != nil {
		t.Fatalf("gang over TLS: %v", err)
	}
	plain, err := client.New(client.Config{Masters: g.Addrs(), Secret: testcluster.Secret, AttemptTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := plain.Status(short); err == nil {
		t.Fatal("a client without a certificate got the status")
	}
	// A certificate file that is not there is a clear error.
	bad := files
	bad.CertFile = filepath.Join(t.TempDir(), "missing.pem")
	if _, err := client.New(client.Config{Masters: g.Addrs(), Secret: testcluster.Secret, TLS: bad}); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("missing certificate: %v", err)
	}
}

// Directories an earlier run of the worker left behind are removed once
// older than the cleanup delay; recent ones are kept.
func TestStaleDirectoriesRemoved(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	dir := t.TempDir()
	old, recent := filepath.Join(dir, "app-old"), filepath.Join(dir, "app-recent")
	for _, d := range []string{old, recent} {
		if err := os.MkdirAll(filepath.Join(d, "exec-0"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.WorkDir = dir; c.CleanupDelay = time.Hour })
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the stale directory to go", func() bool {
		_, err := os.Stat(old)
		return errors.Is(err, os.ErrNotExist)
	}))

	if _, err := os.Stat(recent); err != nil {
		t.Fatalf("recent directory removed: %v", err)
	}
}

// An executor that prints far more than spindle.worker.log.maxSize leaves
// the rotated files only, and ReadLog's tail is its last output.
func TestExecutorLogsRotated(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	var workDir string
	w := testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) {
		c.LogMaxBytes, c.LogMaxFiles = 4096, 1
		workDir = c.WorkDir
	})
	g.WaitWorkers(1)
	c := g.Client()
	id := app(t, c, "chatty")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	if _, err := request(ctx, c, id, 10*time.Second, shells(1, 1, 64, 0,
		`i=0; while [ $i -lt 3000 ]; do echo "progress line $i"; i=$((i+1)); done`)); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, id, "exec-0", pb.ExecutorState_EXECUTOR_STATE_EXITED)
	var total int64
	entries, _ := os.ReadDir(filepath.Join(workDir, id, "exec-0"))
	for _, e := range entries {
		if e.Name() == "stdout" || e.Name() == "stdout.1" {
			fi, _ := e.Info()
			if fi.Size() > 4096 {
				t.Errorf("%s is %d bytes, over the 4096 bound", e.Name(), fi.Size())
			}
			total += fi.Size()
		}
		if e.Name() == "stdout.2" {
			t.Errorf("a second old file was kept")
		}
	}
	if total == 0 || total > 8192 {
		t.Fatalf("kept %d bytes of stdout: want the last rotations only", total)
	}
	conn := dialWorker(t, w.W.Addr(), testcluster.Secret)
	resp, err := pb.NewWorkerClient(conn).ReadLog(ctx, &pb.ReadLogRequest{AppId: id, ExecutorId: "exec-0", Stream: "stdout", Offset: -40})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(resp.GetData()), "progress line 2999\n") || resp.GetSize() < 40000 {
		t.Fatalf("tail %q of a stream of %d bytes", resp.GetData(), resp.GetSize())
	}
}
