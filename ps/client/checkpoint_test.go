package client

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// A checkpoint taken at a clock under BSP holds exactly the updates of the
// steps up to it; a new set of servers restores it, optimizer state and
// clock included; a checkpoint without its manifest is never picked.
func TestCheckpointRestore(t *testing.T) {
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	base := filepath.Join(t.TempDir(), "ps")
	specs := []*ps.TableSpec{
		{Name: "adam", Dim: 2, Optimizer: &pspb.Optimizer{Kind: ps.Adam, LearningRate: 0.1}},
		// SGD with small integer gradients sums exactly, in any order.
		{Name: "sgd", Dim: 1, Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 0.5}},
	}
	keys := keysN(300)
	grad := func(worker, step, dim int) []float32 {
		g := make([]float32, len(keys)*dim)
		for i := range g {
			g[i] = float32((i+worker*7+step*13)%5) - 2
		}
		return g
	}
	pushAll := func(cl *Client, worker, step int) error {
		for _, s := range specs {
			if err := cl.Push(ctx(t), s.Name, keys, grad(worker, step, int(s.Dim))); err != nil {
				return err
			}
		}
		return nil
	}

	// Two workers, three steps; worker 0 checkpoints at steps 2 and 3.
	c := startCluster(t, clusterOpts{servers: 2, workers: 2})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	clients := []*Client{c.client(t, 0), c.client(t, 1)}
	for w, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = func() error {
				ctx := ctx(t)
				for _, s := range specs {
					if err := cl.Declare(ctx, s); err != nil {
						return err
					}
				}
				for step := 1; step <= 3; step++ {
					if err := cl.Pull(ctx, "adam", keys, make([]float32, len(keys)*2)); err != nil {
						return err
					}
					if err := pushAll(cl, w, step); err != nil {
						return err
					}
					if w == 0 && step >= 2 {
						if _, err := cl.ClockAndCheckpoint(ctx, base, res); err != nil {
							return err
						}
						continue
					}
					if err := cl.Clock(ctx); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}
	ctx := ctx(t)
	pullAdam := func(cl *Client) []float32 {
		rows := make([]float32, len(keys)*2)
		if err := cl.Pull(ctx, "adam", keys, rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	final := pullAdam(clients[0])
	clients[0].Push(ctx, "adam", keys, grad(5, 5, 2))
	finalThenPush := pullAdam(clients[0])

	// The latest checkpoint (clock 3) is the final state, Adam's moments
	// and step counts too: the same push moves it the same way.
	fresh := startCluster(t, clusterOpts{servers: 2, workers: 2})
	cl := fresh.client(t, 0)
	clock, ok, err := cl.Restore(ctx, base, res)
	if err != nil || !ok || clock != 3 || cl.Steps() != 3 {
		t.Fatalf("restore: clock %d, found %v, steps %d, %v; want clock 3", clock, ok, cl.Steps(), err)
	}
	for _, s := range specs {
		if err := cl.Declare(ctx, s); err != nil {
			t.Fatalf("declaring the restored table %s alike: %v", s.Name, err)
		}
	}
	if !slices.Equal(pullAdam(cl), final) {
		t.Fatal("the restored weights differ from the state at clock 3")
	}
	cl.Push(ctx, "adam", keys, grad(5, 5, 2))
	if !slices.Equal(pullAdam(cl), finalThenPush) {
		t.Fatal("the same push moved the restored table differently: its optimizer state was not restored")
	}
	// Another worker's restore of the same checkpoint changes nothing more.
	if _, _, err := fresh.client(t, 1).Restore(ctx, base, res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pullAdam(cl), finalThenPush) {
		t.Fatal("a second restore of the same checkpoint rolled the tables back")
	}

	// Without its manifest, clock 3 is incomplete: clock 2 is restored,
	// holding exactly the updates of steps 1 and 2.
	if err := os.Remove(filepath.Join(base, "clock-3", ManifestName)); err != nil {
		t.Fatal(err)
	}
	older := startCluster(t, clusterOpts{servers: 2, workers: 2})
	cl = older.client(t, 0)
	if clock, ok, err := cl.Restore(ctx, base, res); err != nil || !ok || clock != 2 {
		t.Fatalf("restore without clock 3's manifest: clock %d, %v, %v; want 2", clock, ok, err)
	}
	cl.Declare(ctx, specs[1])
	got := make([]float32, len(keys))
	if err := cl.Pull(ctx, "sgd", keys, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		var sum float32
		for w := range 2 {
			for step := 1; step <= 2; step++ {
				sum += grad(w, step, 1)[i]
			}
		}
		if got[i] != -0.5*sum {
			t.Fatalf("key %d at clock 2: %v, want %v (steps 1 and 2 of both workers, nothing of step 3)", i, got[i], -0.5*sum)
		}
	}

	// Another number of servers is refused, naming both.
	three := startCluster(t, clusterOpts{servers: 3, workers: 1})
	if _, _, err := three.client(t, 0).Restore(ctx, base, res); err == nil || !strings.Contains(err.Error(), "2 parameter servers; this job has 3") {
		t.Fatalf("restore onto 3 servers: %v", err)
	}
	// Nothing to restore is no error.
	if _, ok, err := cl.Restore(ctx, filepath.Join(t.TempDir(), "none"), res); ok || err != nil {
		t.Fatalf("restore from an empty place: found %v, %v", ok, err)
	}
}
