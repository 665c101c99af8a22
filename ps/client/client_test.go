package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/internal/pstest"
	"github.com/spindle-ml/spindle/ps/pspb"
)

const token = "0123456789abcdef0123456789abcdef"

// cluster is a set of real servers on loopback (ps/internal/pstest).
type cluster struct{ *pstest.Cluster }

type clusterOpts struct {
	servers, workers int
	staleness        ps.Staleness
	memory           int64
	waitTimeout      time.Duration
	ringVersion      uint64
	replicas         int
}

func quiet() *slog.Logger { return pstest.Quiet() }

// testLink is the data link of the clusters and clients the tests start:
// "" for gRPC; TestOverUCX runs tests again with "ucx:required".
var testLink string

// startCluster runs real servers on loopback, each behind the peer-token
// handshake, until the test ends. Over UCX, the test fails unless the
// servers took pulls and pushes over it.
func startCluster(tb testing.TB, o clusterOpts) *cluster {
	tb.Helper()
	c := &cluster{pstest.Start(tb, pstest.Options{Servers: o.servers, Workers: o.workers, Token: token, Staleness: o.staleness,
		MemoryBytes: o.memory, WaitTimeout: o.waitTimeout, RingVersion: o.ringVersion, Replicas: o.replicas, DataLink: testLink})}
	if link := testLink; link == "ucx:required" {
		tb.Cleanup(func() {
			served := uint64(0)
			for _, s := range c.Servers {
				served += s.DataLinkServed()
			}
			if served == 0 && !tb.Failed() {
				tb.Errorf("data link %s: no pull or push went over it", link)
			}
		})
	}
	return c
}

func (c *cluster) client(t *testing.T, worker int) *Client {
	t.Helper()
	cl, err := New(Config{Servers: c.Addrs, Token: token, Worker: worker, DataLink: testLink, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.closeConns() })
	return cl
}

// ctx bounds a whole test against a hang, not its speed: a test trains
// for hundreds of pushes of thousands of rows, and with the race detector
// on a machine loaded ten times over its cores a push takes up to a second
// (a fixed 20 s failed TestServerLossLosesNoAcknowledgedPush there).
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	t.Cleanup(cancel)
	return c
}

func keysN(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)*7919 + 3
	}
	return out
}

// A push moves exactly the pushed rows, by the optimizer's step, on
// whichever server owns each key: with one server, which takes every
// call whole, unrouted, and with several; in calls small enough to keep
// their order and large enough to go sorted (split), whose rows must
// still land where their keys sit in the call.
func TestPullPushRoundTrip(t *testing.T) {
	for _, servers := range []int{1, 3} {
		for _, n := range []int{sortFrom - 1, 2 * sortFrom} {
			t.Run(fmt.Sprintf("servers=%d/keys=%d", servers, n), func(t *testing.T) { testPullPushRoundTrip(t, servers, n) })
		}
	}
}

func testPullPushRoundTrip(t *testing.T, servers, n int) {
	c := startCluster(t, clusterOpts{servers: servers, workers: 1})
	cl := c.client(t, 0)
	ctx := ctx(t)
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 4, Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 0.5}}); err != nil {
		t.Fatal(err)
	}
	// A call without keys asks no server anything.
	if err := cl.Pull(ctx, "emb", nil, nil); err != nil {
		t.Fatalf("pull of no keys: %v", err)
	}
	if err := cl.Push(ctx, "emb", nil, nil); err != nil {
		t.Fatalf("push of no keys: %v", err)
	}
	keys := keysN(n)
	rows := make([]float32, len(keys)*4)
	if err := cl.Pull(ctx, "emb", keys, rows); err != nil {
		t.Fatal(err)
	}
	for _, v := range rows {
		if v != 0 {
			t.Fatalf("a new row is %v, want zeros", v)
		}
	}
	grads := make([]float32, len(rows))
	for i := range grads {
		grads[i] = float32(i % 11)
	}
	if err := cl.Push(ctx, "emb", keys, grads); err != nil {
		t.Fatal(err)
	}
	if err := cl.Pull(ctx, "emb", keys, rows); err != nil {
		t.Fatal(err)
	}
	for i, v := range rows {
		if want := -0.5 * grads[i]; v != want {
			t.Fatalf("value %d is %v after the push, want %v", i, v, want)
		}
	}
	stats, err := cl.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := uint64(0)
	for i, s := range stats {
		if len(s.Tables) != 1 || s.Tables[0].Keys == 0 {
			t.Fatalf("server %d holds %v: want a share of the keys", i, s.Tables)
		}
		total += s.Tables[0].Keys
	}
	if total != uint64(len(keys)) {
		t.Fatalf("servers hold %d keys together, want %d", total, len(keys))
	}
	// What the servers report to the driver (the spindle_ps_* metrics):
	// every key of the two pulls and the push, and time spent on them.
	sum := map[string]float64{}
	for _, s := range c.Servers {
		for k, v := range s.Report() {
			sum[k] += v
		}
	}
	if f := float64(n); sum["ps_pull_keys"] != 2*f || sum["ps_push_keys"] != f || sum["ps_pull_seconds"] <= 0 || sum["ps_push_seconds"] <= 0 || sum["ps_keys"] != f {
		t.Fatalf("the servers report %v: want %d keys pulled, %d pushed and held, and time answering", sum, 2*n, n)
	}
	// Export sees every row.
	seen := 0
	err = cl.Export(ctx, "emb", func(keys []uint64, values []float32) error {
		seen += len(keys)
		if len(values) != len(keys)*4 {
			return fmt.Errorf("%d values for %d keys", len(values), len(keys))
		}
		return nil
	})
	if err != nil || seen != len(keys) {
		t.Fatalf("export saw %d keys (%v), want %d", seen, err, len(keys))
	}
}

// A dense table has its rows from the start, split in ranges.
func TestDenseTable(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 2, workers: 1})
	cl := c.client(t, 0)
	ctx := ctx(t)
	spec := &ps.TableSpec{Name: "w", Dim: 2, Rows: 10, Initializer: &pspb.Initializer{Kind: ps.Uniform, Scale: 1, Seed: 3}}
	if err := cl.Declare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	stats, _ := cl.Stats(ctx)
	if stats[0].Tables[0].Keys != 5 || stats[1].Tables[0].Keys != 5 {
		t.Fatalf("dense rows per server: %d and %d, want 5 and 5", stats[0].Tables[0].Keys, stats[1].Tables[0].Keys)
	}
	rows := make([]float32, 20)
	if err := cl.Pull(ctx, "w", keysIn(0, 10), rows); err != nil {
		t.Fatal(err)
	}
	for _, v := range rows {
		if v == 0 || v < -1 || v > 1 {
			t.Fatalf("uniform(1) row value %v", v)
		}
	}
	err := cl.Pull(ctx, "w", []uint64{10}, make([]float32, 2))
	if err == nil || !strings.Contains(err.Error(), "outside its 10 rows") {
		t.Fatalf("pull of row 10 of 10: got %v", err)
	}
}

func keysIn(from, to uint64) []uint64 {
	var out []uint64
	for k := from; k < to; k++ {
		out = append(out, k)
	}
	return out
}

// Bad pushes are refused whole: nothing is applied.
func TestBadPushesApplyNothing(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 2, workers: 1})
	cl := c.client(t, 0)
	ctx := ctx(t)
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 4}); err != nil {
		t.Fatal(err)
	}
	keys := keysN(100)
	// Around the client's own checks, straight at a server.
	stub := cl.stub(0)
	ring := cl.ring.Load()
	var mine []uint64
	for _, k := range keys {
		if ring.Owner(k) == 0 {
			mine = append(mine, k)
		}
	}
	cases := []struct {
		name string
		req  *pspb.PushRequest
		code codes.Code
		says string
	}{
		{"unknown table", &pspb.PushRequest{Table: "nope", Keys: ps.KeyBytes(mine), Grads: ps.FloatBytes(make([]float32, len(mine)*4)), RingVersion: 1},
			codes.NotFound, `no table "nope"`},
		{"wrong dim", &pspb.PushRequest{Table: "emb", Keys: ps.KeyBytes(mine), Grads: ps.FloatBytes(make([]float32, len(mine)*3)), RingVersion: 1},
			codes.InvalidArgument, "has dim 4"},
		{"torn keys", &pspb.PushRequest{Table: "emb", Keys: []byte{1, 2, 3}, RingVersion: 1},
			codes.InvalidArgument, "not a whole number"},
		{"unknown worker", &pspb.PushRequest{Table: "emb", Keys: ps.KeyBytes(mine), Grads: ps.FloatBytes(make([]float32, len(mine)*4)), RingVersion: 1, Worker: 5},
			codes.InvalidArgument, "worker 5"},
		{"key of another server", &pspb.PushRequest{Table: "emb", Keys: ps.KeyBytes(keys), Grads: ps.FloatBytes(make([]float32, len(keys)*4)), RingVersion: 1},
			codes.InvalidArgument, "belongs to server 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stub.Push(ctx, tc.req)
			if st, _ := status.FromError(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
				t.Fatalf("got %v, want %s saying %q", err, tc.code, tc.says)
			}
		})
	}
	stats, _ := cl.Stats(ctx)
	for i, s := range stats {
		if s.Tables[0].Pushes != 0 || s.Tables[0].Keys != 0 {
			t.Fatalf("server %d applied %d pushes, holds %d keys after refused pushes", i, s.Tables[0].Pushes, s.Tables[0].Keys)
		}
	}
	// The client's own checks.
	if err := cl.Push(ctx, "emb", keys, make([]float32, 5)); err == nil {
		t.Fatal("a push with the wrong number of values was sent")
	}
	if err := cl.Push(ctx, "other", keys, make([]float32, 400)); err == nil || !strings.Contains(err.Error(), "declare it first") {
		t.Fatalf("a push to an undeclared table: %v", err)
	}
	// Declaring a table again with another spec fails, naming it.
	err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 8})
	if st, _ := status.FromError(errors.Unwrap(err)); st.Code() != codes.AlreadyExists {
		t.Fatalf("redeclare with another dim: %v", err)
	}
}

// A client routing by another version of the ring is told, refreshes and
// goes on.
func TestStaleRingRefreshed(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 2, workers: 1, ringVersion: 2})
	cl := c.client(t, 0) // holds version 1
	ctx := ctx(t)
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 1}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Push(ctx, "emb", keysN(100), make([]float32, 100)); err != nil {
		t.Fatalf("push with a stale ring: %v", err)
	}
	if v := cl.ring.Load().Version(); v != 2 {
		t.Fatalf("client ring version %d after the refresh, want 2", v)
	}
}

// A server that says the client's ring is stale and dies before the
// client asks it for the new one is reported gone to another server, and
// the client goes on with the ring that answer gives. (A job once failed
// so: a pull told "stale ring" by a server just before its kill.)
func TestStaleThenGoneReported(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 3, workers: 1, replicas: 1, ringVersion: 2})
	cl := c.client(t, 0) // holds version 1
	ctx := ctx(t)
	c.Kill(1)
	stale := status.Error(codes.FailedPrecondition, "stale ring: client ring version 1, server 1 holds version 2")
	if err := cl.learnRing(ctx, 1, stale); err != nil {
		t.Fatalf("learning the ring after server 1 said ours was stale and went: %v", err)
	}
	if r := cl.ring.Load(); !r.Dead(1) || r.Version() <= 2 {
		t.Fatalf("the client took ring version %d (server 1 dead: %v), want one after 2 without server 1", r.Version(), r.Dead(1))
	}
}

// Calls without the job's peer token never reach a server.
func TestUnauthenticatedRefused(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 1, workers: 1})
	cl, err := New(Config{Servers: c.Addrs, Token: strings.Repeat("z", 32), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.closeConns()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Second))
	defer cancel()
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 1}); err == nil {
		t.Fatal("a client with the wrong token declared a table")
	}
	real := c.client(t, 0)
	if err := real.Declare(context.Background(), &ps.TableSpec{Name: "x", Dim: 1}); err != nil {
		t.Fatal(err)
	}
	stats, _ := real.Stats(context.Background())
	if len(stats[0].Tables) != 1 {
		t.Fatalf("server holds %d tables, want only the authenticated client's", len(stats[0].Tables))
	}
}

// A server out of memory names itself, the table and its key count, and
// the push that did not fit changes nothing.
func TestOutOfMemoryNamed(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 1, workers: 1, memory: 64 << 10})
	cl := c.client(t, 0)
	ctx := ctx(t)
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "big", Dim: 64}); err != nil {
		t.Fatal(err)
	}
	err := cl.Push(ctx, "big", keysN(1000), make([]float32, 64000))
	if st, _ := status.FromError(errors.Unwrap(err)); st.Code() != codes.ResourceExhausted ||
		!strings.Contains(err.Error(), "table big:") || !strings.Contains(err.Error(), "keys of dim 64") {
		t.Fatalf("got %v, want ResourceExhausted naming table big and its keys", err)
	}
	stats, _ := cl.Stats(ctx)
	if stats[0].Tables[0].Pushes != 0 {
		t.Fatal("the push that did not fit was applied")
	}
}

// BSP holds a worker at its next pull until every worker has finished the
// step; SSP lets it run s steps ahead; ASP never waits.
func TestConsistencyModels(t *testing.T) {
	for _, tc := range []struct {
		staleness ps.Staleness
		ahead     int // steps worker 0 can finish while worker 1 stays at 0
	}{{0, 1}, {2, 3}, {ps.Async, 10}} {
		t.Run(tc.staleness.String(), func(t *testing.T) {
			c := startCluster(t, clusterOpts{servers: 2, workers: 2, staleness: tc.staleness})
			fast, slow := c.client(t, 0), c.client(t, 1)
			ctx := ctx(t)
			for _, cl := range []*Client{fast, slow} {
				if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 1}); err != nil {
					t.Fatal(err)
				}
			}
			step := func(cl *Client, timeout time.Duration) error {
				ctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				if err := cl.Pull(ctx, "emb", keysN(10), make([]float32, 10)); err != nil {
					return err
				}
				if err := cl.Push(ctx, "emb", keysN(10), make([]float32, 10)); err != nil {
					return err
				}
				return cl.Clock(ctx)
			}
			for i := range tc.ahead {
				if err := step(fast, 5*time.Second); err != nil {
					t.Fatalf("step %d of the fast worker, within the bound: %v", i, err)
				}
			}
			if tc.staleness < 0 {
				return
			}
			// One more step would break the bound: it waits for the slow
			// worker, and goes on once that one's clock moves.
			blocked := make(chan error, 1)
			go func() { blocked <- step(fast, 10*time.Second) }()
			select {
			case err := <-blocked:
				t.Fatalf("the fast worker went %d steps ahead of %s (%v)", tc.ahead+1, tc.staleness, err)
			case <-time.After(300 * time.Millisecond):
			}
			if err := step(slow, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := <-blocked; err != nil {
				t.Fatalf("the fast worker did not go on once the slow one moved: %v", err)
			}
		})
	}
}

// A worker that leaves releases the others; one that stays silent is
// named when the wait times out.
func TestWaitReleasedOrNamed(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 1, workers: 3, waitTimeout: 500 * time.Millisecond})
	a, b := c.client(t, 0), c.client(t, 1)
	ctx := ctx(t)
	if err := a.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil { // worker 1 is done
		t.Fatal(err)
	}
	if err := a.Clock(ctx); err != nil {
		t.Fatal(err)
	}
	err := a.Pull(ctx, "emb", keysN(1), make([]float32, 1))
	if st, _ := status.FromError(errors.Unwrap(err)); st.Code() != codes.DeadlineExceeded ||
		!strings.Contains(err.Error(), "worker 2 at clock 0") || strings.Contains(err.Error(), "worker 1") {
		t.Fatalf("got %v, want a timeout naming worker 2 (and not worker 1, which left)", err)
	}
}

// The optimizers move a weight as their update rules say.
func TestOptimizerSteps(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 1, workers: 1})
	cl := c.client(t, 0)
	ctx := ctx(t)
	const g = 0.5
	ftrlW := func() float64 { // one FTRL step from zero, alpha 0.1, beta 1, l1 0.1, l2 0.01
		n := g * g
		z := g - (math.Sqrt(n)-0)/0.1*0
		return -(z - 0.1) / ((1+math.Sqrt(n))/0.1 + 0.01)
	}
	for _, tc := range []struct {
		opt  *pspb.Optimizer
		want float64
	}{
		{&pspb.Optimizer{Kind: ps.SGD, LearningRate: 0.1}, -0.1 * g},
		{&pspb.Optimizer{Kind: ps.AdaGrad, LearningRate: 0.1, InitialAccumulator: 0.1}, -0.1 * g / (math.Sqrt(0.1+g*g) + 1e-7)},
		{&pspb.Optimizer{Kind: ps.Adam, LearningRate: 0.1}, -0.1}, // Adam's first step is lr·sign(g)
		{&pspb.Optimizer{Kind: ps.FTRL, LearningRate: 0.1, L1: 0.1, L2: 0.01}, ftrlW()},
	} {
		t.Run(tc.opt.Kind, func(t *testing.T) {
			if err := cl.Declare(ctx, &ps.TableSpec{Name: tc.opt.Kind, Dim: 1, Optimizer: tc.opt}); err != nil {
				t.Fatal(err)
			}
			if err := cl.Push(ctx, tc.opt.Kind, []uint64{42}, []float32{g}); err != nil {
				t.Fatal(err)
			}
			w := make([]float32, 1)
			if err := cl.Pull(ctx, tc.opt.Kind, []uint64{42}, w); err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(w[0])-tc.want) > 1e-5 {
				t.Fatalf("weight %v after one step, want %v", w[0], tc.want)
			}
		})
	}
	// FTRL's L1 keeps a weight at exactly zero while its gradients are small.
	if err := cl.Push(ctx, ps.FTRL, []uint64{7}, []float32{0.05}); err != nil {
		t.Fatal(err)
	}
	w := make([]float32, 1)
	cl.Pull(ctx, ps.FTRL, []uint64{7}, w)
	if w[0] != 0 {
		t.Fatalf("ftrl weight %v after a gradient below l1, want 0", w[0])
	}
}

// Barrier holds a worker, even under ASP, until every worker still in
// the job has caught up with its clock.
func TestBarrier(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 2, workers: 3, staleness: ps.Async})
	ctx := ctx(t)
	a, b, gone := c.client(t, 0), c.client(t, 1), c.client(t, 2)
	if err := gone.Close(ctx); err != nil { // a worker that left is not waited for
		t.Fatal(err)
	}
	for range 2 {
		if err := a.Clock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- a.Barrier(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("the barrier let worker 0 through with worker 1 two steps behind (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	b.Clock(ctx)
	select {
	case err := <-done:
		t.Fatalf("the barrier let worker 0 through with worker 1 one step behind (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	b.Clock(ctx)
	if err := <-done; err != nil {
		t.Fatalf("barrier: %v", err)
	}
}

// A dense table too large for the server's memory is refused, naming the
// server's tables, and the memory it reserved is given back.
func TestDenseTableTooLarge(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 1, workers: 1, memory: 1 << 20})
	cl := c.client(t, 0)
	ctx := ctx(t)
	err := cl.Declare(ctx, &ps.TableSpec{Name: "huge", Dim: 64, Rows: 1 << 16})
	if st, _ := status.FromError(errors.Unwrap(err)); st.Code() != codes.ResourceExhausted {
		t.Fatalf("a 16 MiB dense table on a 1 MiB server: %v", err)
	}
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "small", Dim: 4, Rows: 100}); err != nil {
		t.Fatalf("a small table after the refused one: %v", err)
	}
}
