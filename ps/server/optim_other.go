//go:build !amd64 || purego

package server

// adaGradVector does nothing without vector kernels: the scalar loop
// updates the whole row.
func adaGradVector(w, acc, g []float32, lr, eps float32) int { return 0 }
