package client

import (
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
	<-killed
	c.Kill(1) // server 1 goes
	for range clients {
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
