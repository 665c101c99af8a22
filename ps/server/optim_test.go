package server

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector AdaGrad must give the scalar loop's bits, or replicas and
// restarts on machines with and without it would drift apart.
func TestAdaGradVectorMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 71 {
		for trial := range 20 {
			g := make([]float32, n)
			w1, a1 := make([]float32, n), make([]float32, n)
			for i := range g {
				scale := float32(math.Pow(10, float64(rng.IntN(12)-6)))
				g[i] = (rng.Float32()*2 - 1) * scale
				w1[i] = rng.Float32()*2 - 1
				a1[i] = rng.Float32() * scale
			}
			if trial == 0 && n > 0 {
				g[0], a1[0] = 0, 0 // 0/eps
			}
			w2, a2 := append([]float32(nil), w1...), append([]float32(nil), a1...)
			lr, eps := float32(0.05), float32(1e-8)
			k := adaGradVector(w1, a1, g, lr, eps)
			adaGradScalar(w1[k:], a1[k:], g[k:], lr, eps)
			adaGradScalar(w2, a2, g, lr, eps)
			for i := range g {
				if math.Float32bits(w1[i]) != math.Float32bits(w2[i]) || math.Float32bits(a1[i]) != math.Float32bits(a2[i]) {
					t.Fatalf("n=%d, value %d: vector w=%v acc=%v, scalar w=%v acc=%v", n, i, w1[i], a1[i], w2[i], a2[i])
				}
			}
		}
	}
}
