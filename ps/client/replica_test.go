package client

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// A server stopped in the middle of training (its port closes, as a
// killed one's does) is taken out of the ring; its keys are served by
// their backups, which had every acknowledged push; training goes on, and
// in the end every acknowledged push was applied exactly once.
// It holds for sparse tables (rows on the ring) and dense ones (rows in
// ranges, the next servers by index backing each range up).
func TestServerLossLosesNoAcknowledgedPush(t *testing.T) {
	for _, dense := range []bool{false, true} {
		name := "sparse"
		if dense {
			name = "dense"
		}
		t.Run(name, func(t *testing.T) { testServerLoss(t, dense) })
	}
}

func testServerLoss(t *testing.T, dense bool) {
	c := startCluster(t, clusterOpts{servers: 3, workers: 2, replicas: 1, staleness: ps.Async})
	ctx := ctx(t)
	keys := keysN(3000)
	spec := &ps.TableSpec{Name: "w", Dim: 2, Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 1}}
	if dense {
		spec.Rows = uint64(len(keys))
		for i := range keys {
			keys[i] = uint64(i)
		}
	}
	const steps = 120
	grad := func(worker, step int) []float32 {
		g := make([]float32, len(keys)*2)
		for i := range g {
			g[i] = float32((i+worker+step)%3 - 1) // small integers: sums are exact
		}
		return g
	}
	clients := []*Client{c.client(t, 0), c.client(t, 1)}
	for _, cl := range clients {
		if err := cl.Declare(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	recovered := make(chan time.Duration, 2)
	killed := make(chan time.Time)
	for w, cl := range clients {
		go func() {
			var since time.Time
			for step := range steps {
				t0 := time.Now()
				if err := cl.Push(ctx, "w", keys, grad(w, step)); err != nil {
					errs <- err
					return
				}
				if testing.Verbose() && time.Since(t0) > 100*time.Millisecond {
					t.Logf("worker %d step %d took %s", w, step, time.Since(t0))
				}
				if d := time.Since(t0); d > 200*time.Millisecond && since.IsZero() {
					since = t0
					recovered <- d
				}
				if w == 0 && step == steps/3 {
					close(killed)
				}
			}
			errs <- nil
		}()
	}
	// A worker that fails before the kill must fail the test, not leave
	// it waiting for a kill that never comes.
	finished := 0
	for waiting := true; waiting; {
		select {
		case <-killed:
			waiting = false
		case err := <-errs:
			if err != nil {
				t.Fatalf("training failed before server 1 was stopped: %v", err)
			}
			finished++
		}
	}
	c.Kill(1) // server 1 goes
	for range len(clients) - finished {
		if err := <-errs; err != nil {
			t.Fatalf("training did not survive server 1's loss: %v", err)
		}
	}
	select {
	case d := <-recovered:
		t.Logf("the push under way when server 1 went took %s", d.Round(time.Millisecond))
	default:
	}
	if !clients[0].ring.Load().Dead(1) {
		t.Fatalf("server 1 is still in the client's ring (version %d)", clients[0].ring.Load().Version())
	}
	got := make([]float32, len(keys)*2)
	if err := clients[0].Pull(ctx, "w", keys, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(got))
	for w := range 2 {
		for step := range steps {
			for i, g := range grad(w, step) {
				want[i] -= g
			}
		}
	}
	r1, _ := ps.NewRing(1, c.Addrs, 0)
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			if bad < 10 {
				t.Errorf("value %d (key %d, owner %d, replicas %v) is %v, want %v: a push was lost or applied twice",
					i, keys[i/2], r1.OwnerOf(keys[i/2], spec.Rows), r1.Holders(nil, keys[i/2], spec.Rows, 1), got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d values of %d wrong", bad, len(got))
	}
}

// A replacement for a dead server rejoins the ring at the dead one's
// index while two workers train under BSP: it gets its rows from the
// servers that stood in for it, the workers' clocks, and its keys back.
// Then another server dies, so some rows live only on the replacement and
// its backups: every acknowledged push is still there, exactly once.
func TestReplacementRejoins(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 3, workers: 2, replicas: 1, staleness: ps.Staleness(0), waitTimeout: 10 * time.Second})
	ctx := ctx(t)
	const steps = 90
	tr := newTraining(t, ctx, c)
	clients := tr.clients
	errs := make(chan error, 2)
	at := map[int]chan struct{}{20: make(chan struct{}), 50: make(chan struct{})}
	for w, cl := range clients {
		go func() {
			errs <- func() error {
				for step := range steps {
					if err := tr.step(cl, w, step); err != nil {
						return fmt.Errorf("worker %d step %d of %d: %w", w, step, steps, err)
					}
					if ch, ok := at[step]; ok && w == 0 {
						close(ch)
					}
				}
				return nil
			}()
		}()
	}
	<-at[20]
	c.Kill(1)
	<-at[50]
	if err := c.Replace(t, ctx, 1); err != nil {
		t.Fatalf("the replacement for server 1 did not rejoin: %v", err)
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatalf("training did not survive server 1's loss and replacement: %v", err)
		}
	}
	ring := clients[0].ring.Load()
	if ring.Dead(1) || ring.Servers()[1] != c.Addrs[1] || clients[0].addr(1) != c.Addrs[1] {
		t.Fatalf("ring version %d: server 1 dead %v at %s, want alive at the replacement's %s", ring.Version(), ring.Dead(1), ring.Servers()[1], c.Addrs[1])
	}
	st, err := clients[0].Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st[1].Clocks[0] != steps || st[1].Clocks[1] != steps {
		t.Errorf("the replacement's clocks are %v, want %d for both workers", st[1].Clocks, steps)
	}

	c.Kill(2) // now some rows are only on the replacement and its backup
	tr.checkSums(steps)
}

// training is the job of the tests of a server lost and replaced while
// two workers train under BSP: a sparse table w (dim 2) and a dense one d
// (600 rows), declared by both workers' clients.
type training struct {
	t          *testing.T
	ctx        context.Context
	keys, rows []uint64
	specs      []*ps.TableSpec
	clients    []*Client
}

func newTraining(t *testing.T, ctx context.Context, c *cluster) *training {
	t.Helper()
	tr := &training{t: t, ctx: ctx, keys: keysN(3000), rows: make([]uint64, 600), specs: []*ps.TableSpec{
		{Name: "w", Dim: 2, Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 1}},
		{Name: "d", Dim: 1, Rows: 600, Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 1}},
	}, clients: []*Client{c.client(t, 0), c.client(t, 1)}}
	for i := range tr.rows {
		tr.rows[i] = uint64(i)
	}
	for _, cl := range tr.clients {
		for _, s := range tr.specs {
			if err := cl.Declare(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tr
}

// trainGrad is worker's gradient at step for n rows of dim: small
// integers, so sums are exact.
func trainGrad(n, dim, worker, step int) []float32 {
	g := make([]float32, n*dim)
	for i := range g {
		g[i] = float32((i+worker+step)%3 - 1)
	}
	return g
}

// checkSums fails the test unless every value of both tables is what
// steps steps of both workers' gradients make of it, each applied once.
func (tr *training) checkSums(steps int) {
	t := tr.t
	t.Helper()
	for _, tt := range []struct {
		name string
		keys []uint64
		dim  int
	}{{"w", tr.keys, 2}, {"d", tr.rows, 1}} {
		got := make([]float32, len(tt.keys)*tt.dim)
		if err := tr.clients[0].Pull(tr.ctx, tt.name, tt.keys, got); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(got))
		for w := range tr.clients {
			for step := range steps {
				for i, g := range trainGrad(len(tt.keys), tt.dim, w, step) {
					want[i] -= g
				}
			}
		}
		bad := 0
		for i := range got {
			if got[i] != want[i] {
				if bad < 5 {
					t.Errorf("table %s value %d (key %d) is %v, want %v", tt.name, i, tt.keys[i/tt.dim], got[i], want[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Fatalf("table %s: %d values of %d wrong", tt.name, bad, len(got))
		}
	}
}

// step is one BSP step of worker w on its client cl: pull the sparse
// rows, push their gradients and the dense table's, and clock.
func (tr *training) step(cl *Client, w, step int) error {
	if err := cl.Pull(tr.ctx, "w", tr.keys, make([]float32, len(tr.keys)*2)); err != nil {
		return err
	}
	if err := cl.Push(tr.ctx, "w", tr.keys, trainGrad(len(tr.keys), 2, w, step)); err != nil {
		return err
	}
	if err := cl.Push(tr.ctx, "d", tr.rows, trainGrad(len(tr.rows), 1, w, step)); err != nil {
		return err
	}
	return cl.Clock(tr.ctx)
}

// TestRejoinOutlivesItsCoordinator: the coordinator of a replacement's
// rejoin (the lowest live server) dies after one server adopted the ring
// that has the replacement alive, so copied it its part of the rows, and
// before the others did. The replacement still rejoins: the next server
// takes the dead coordinator out, catches up with the newest ring and has
// every live server copy the replacement its rows again before it serves.
// Training goes on, and every row holds every push exactly once, on the
// replacement's backup copies too (read once server 2 dies).
func TestRejoinOutlivesItsCoordinator(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 4, workers: 2, replicas: 1, staleness: ps.Staleness(0), waitTimeout: 10 * time.Second})
	ctx := ctx(t)
	tr := newTraining(t, ctx, c)
	clients := tr.clients
	train := func(from, to int) {
		t.Helper()
		errs := make(chan error, len(clients))
		for w, cl := range clients {
			go func() {
				for step := from; step < to; step++ {
					if err := tr.step(cl, w, step); err != nil {
						errs <- fmt.Errorf("worker %d step %d: %w", w, step, err)
						return
					}
				}
				errs <- nil
			}()
		}
		for range clients {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	train(0, 20)
	c.Kill(1)
	train(20, 30) // the workers find server 1 gone: the ring takes it out
	info, err := c.Servers[2].GetRing(ctx, &pspb.GetRingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(info.Dead, 1) {
		t.Fatalf("ring version %d has dead servers %v, want server 1 among them", info.Version, info.Dead)
	}

	// The coordinator's rejoin, cut short: the replacement has declared
	// the tables (from JoinState), server 2 adopts the ring with the
	// replacement and copies it its part; server 0 dies before it and
	// server 3 adopt it.
	r := c.StartReplacement(t, 1)
	for _, s := range tr.specs {
		if _, err := r.DeclareTable(ctx, &pspb.DeclareTableRequest{Spec: s}); err != nil {
			t.Fatal(err)
		}
	}
	info.Version++
	info.Servers[1] = c.Addrs[1]
	info.Dead = slices.DeleteFunc(info.Dead, func(d int32) bool { return d == 1 })
	if _, err := c.Servers[2].AdoptRing(ctx, info); err != nil {
		t.Fatal(err)
	}
	c.Kill(0)
	if err := r.Join(ctx, c.Addrs[1]); err != nil {
		t.Fatalf("the replacement did not rejoin once its coordinator died: %v", err)
	}
	// It holds every row it should, as owner or backup, before it serves.
	joined, err := r.GetRing(ctx, &pspb.GetRingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	jr, err := ps.RingFromInfo(joined)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Stats(ctx, &pspb.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range st.Tables {
		tk, dense, n := tr.keys, uint64(0), uint64(0)
		if ts.Name == "d" {
			tk, dense = tr.rows, uint64(len(tr.rows))
		}
		for _, k := range tk {
			if slices.Contains(jr.Holders(nil, k, dense, 1), 1) {
				n++
			}
		}
		if ts.Keys != n {
			t.Errorf("table %s: the replacement holds %d rows once admitted to ring version %d, want the %d it owns or backs up", ts.Name, ts.Keys, jr.Version(), n)
		}
	}
	const steps = 60
	train(30, steps)

	ring := clients[0].ring.Load()
	if ring.Dead(1) || !ring.Dead(0) || ring.Servers()[1] != c.Addrs[1] {
		t.Fatalf("ring version %d: server 0 dead %v, server 1 dead %v at %s; want 0 out and 1 at the replacement's %s",
			ring.Version(), ring.Dead(0), ring.Dead(1), ring.Servers()[1], c.Addrs[1])
	}
	c.Kill(3) // the replacement's backup copies now serve server 3's keys
	tr.checkSums(steps)
}
