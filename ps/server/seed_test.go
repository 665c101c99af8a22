package server_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/internal/pstest"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/ps/server"
)

// A seeded checkpoint restores as the given weights on every server and
// backup, and FTRL goes on from them: a zero gradient leaves each weight
// where it was (its z was set to give that weight).
func TestSeedCheckpointRestoresTheWeights(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	const token = "seed-test-secret"
	c := pstest.Start(t, pstest.Options{Servers: 3, Workers: 1, Token: token, Replicas: 1})
	cl, err := client.New(client.Config{Servers: c.Addrs, Token: token, Logger: pstest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	spec := &ps.TableSpec{Name: "weights", Dim: 2, Optimizer: &pspb.Optimizer{Kind: ps.FTRL, LearningRate: 0.1, L1: 0.5, L2: 1}}
	if err := cl.Declare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	keys := make([]uint64, 500)
	weights := make([]float32, 2*len(keys))
	for i := range keys {
		keys[i] = uint64(i)*7919 + 3
		weights[2*i], weights[2*i+1] = float32(i%13)-6, 0.25*float32(i%5)
	}
	base := filepath.Join(t.TempDir(), "init")
	dir := filepath.Join(base, "clock-0")
	parts, err := server.SeedCheckpoint(ctx, res, dir, 3, 1, spec, keys, weights)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(client.Manifest{Servers: 3, Files: parts})
	if err := os.WriteFile(filepath.Join(dir, client.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := cl.Restore(ctx, base, res); err != nil || !ok {
		t.Fatalf("restore: %v %v", ok, err)
	}
	got := make([]float32, len(weights))
	if err := cl.Pull(ctx, "weights", keys, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != weights[i] {
			t.Fatalf("weight %d: pulled %v, seeded %v", i, got[i], weights[i])
		}
	}
	if err := cl.Push(ctx, "weights", keys, make([]float32, len(weights))); err != nil {
		t.Fatal(err)
	}
	if err := cl.Pull(ctx, "weights", keys, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Abs(float64(got[i]-weights[i])) > 1e-5*math.Max(1, math.Abs(float64(weights[i]))) {
			t.Fatalf("weight %d after a zero FTRL step: %v, seeded %v", i, got[i], weights[i])
		}
	}
}
