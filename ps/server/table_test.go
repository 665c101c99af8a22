package server

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// A pull and a push move each key's own values, whatever the batch: small
// ones, and large ones whose values are touched with the rows.
func TestPullPushBatches(t *testing.T) {
	for _, tc := range []struct{ keys, dim int }{{100, 8}, {40_000, 8}, {5_000, 64}} {
		t.Run(fmt.Sprintf("keys=%d/dim=%d", tc.keys, tc.dim), func(t *testing.T) {
			tab := newTable(&pspb.TableSpec{Name: "emb", Dim: uint32(tc.dim),
				Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 1}, Initializer: &pspb.Initializer{}})
			var bud budget
			keys := make([]uint64, tc.keys)
			grads := make([]float32, tc.keys*tc.dim)
			for j := range keys {
				keys[j] = uint64(j)*7919 + 11
				for d := range tc.dim {
					grads[j*tc.dim+d] = float32(j%1000) + float32(d)/100
				}
			}
			if err := tab.push(keys, grads, &bud); err != nil {
				t.Fatal(err)
			}
			out := make([]float32, len(grads))
			if err := tab.pull(keys, out, &bud); err != nil {
				t.Fatal(err)
			}
			for i, v := range out {
				if v != -grads[i] {
					t.Fatalf("value %d of key %d is %v, want %v", i%tc.dim, keys[i/tc.dim], v, -grads[i])
				}
			}
		})
	}
}

// Small requests lock all their shards at once and large ones shard by
// shard; pushes of both, from several goroutines at once, each apply
// every gradient once and never wait for each other for good.
func TestConcurrentPushes(t *testing.T) {
	tab := newTable(&pspb.TableSpec{Name: "emb", Dim: 4,
		Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 1}, Initializer: &pspb.Initializer{}})
	var bud budget
	const space, rounds = 3000, 40
	sizes := []int{7, 300, wholeRequestKeys, wholeRequestKeys + 1, 2500}
	done := make(chan error, len(sizes))
	for g, n := range sizes {
		go func() {
			keys := make([]uint64, n)
			grads := make([]float32, n*4)
			for i := range grads {
				grads[i] = 1
			}
			for r := range rounds {
				for j := range keys {
					keys[j] = uint64((g*7 + r*n + j*13) % space)
				}
				if err := tab.push(keys, grads, &bud); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	timeout := time.After(time.Minute)
	for range sizes {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("pushes still running after a minute: deadlocked")
		}
	}
	// Every key of a request is distinct (13 is prime to 3000 and n is
	// at most 3000), so each key got one gradient per request it was in.
	want := make([]float32, space)
	for g, n := range sizes {
		for r := range rounds {
			for j := range n {
				want[(g*7+r*n+j*13)%space]--
			}
		}
	}
	keys := make([]uint64, space)
	for k := range keys {
		keys[k] = uint64(k)
	}
	out := make([]float32, space*4)
	if err := tab.pull(keys, out, &bud); err != nil {
		t.Fatal(err)
	}
	for i, v := range out {
		if v != want[i/4] {
			t.Fatalf("key %d value %d is %v, want %v", i/4, i%4, v, want[i/4])
		}
	}
}

// A small request that runs out of memory part way leaves every shard
// unlocked: the next request goes through.
func TestSmallRequestOutOfMemory(t *testing.T) {
	tab := newTable(&pspb.TableSpec{Name: "emb", Dim: 8,
		Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad, LearningRate: 0.1}, Initializer: &pspb.Initializer{}})
	full := errors.New("full")
	bud := budget{limit: 50 * tab.rowBytes(), full: func(int64) error { return full }}
	keys := make([]uint64, 200)
	for j := range keys {
		keys[j] = uint64(j)
	}
	if err := tab.pull(keys, make([]float32, len(keys)*8), &bud); !errors.Is(err, full) {
		t.Fatalf("pull of 200 rows in a budget of 50: %v, want %v", err, full)
	}
	bud.limit = 0 // none
	done := make(chan error, 1)
	go func() { done <- tab.pull(keys[:3], make([]float32, 3*8), &bud) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a pull after a failed one still waits after a minute: shards left locked")
	}
}
