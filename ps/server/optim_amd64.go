//go:build !purego

package server

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func adaGradAVX2(w, acc, grad *float32, n int, lr, eps float32)

// adaGradVector applies AdaGrad to a prefix of the row with vector
// instructions and returns its length; the caller finishes the rest.
// Vector and scalar IEEE operations round alike, and a float32 square
// root equals the float64 one rounded to float32, so the bits are those
// of the scalar loop.
func adaGradVector(w, acc, g []float32, lr, eps float32) int {
	n := len(g) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	adaGradAVX2(&w[0], &acc[0], &g[0], n, lr, eps)
	return n
}
