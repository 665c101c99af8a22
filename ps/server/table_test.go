package server

import (
	"fmt"
	"testing"

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
