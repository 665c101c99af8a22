//go:build !purego

package collective

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2

// The assembly kernels process n elements, n a multiple of 8 (float32) or
// 4 (float64); callers finish the tail.

//go:noescape
func addF32AVX2(dst, src *float32, n int)

//go:noescape
func addF64AVX2(dst, src *float64, n int)

//go:noescape
func addDivF32AVX2(dst, src *float32, n int, d float32)

//go:noescape
func addDivF64AVX2(dst, src *float64, n int, d float64)

// addFloat32 adds a prefix of src into dst with vector instructions and
// returns its length.
func addFloat32(dst, src []float32) int {
	n := len(dst) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	addF32AVX2(&dst[0], &src[0], n)
	return n
}

func addFloat64(dst, src []float64) int {
	n := len(dst) &^ 3
	if !useAVX2 || n == 0 {
		return 0
	}
	addF64AVX2(&dst[0], &src[0], n)
	return n
}

func addDivFloat32(dst, src []float32, d float32) int {
	n := len(dst) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	addDivF32AVX2(&dst[0], &src[0], n, d)
	return n
}

func addDivFloat64(dst, src []float64, d float64) int {
	n := len(dst) &^ 3
	if !useAVX2 || n == 0 {
		return 0
	}
	addDivF64AVX2(&dst[0], &src[0], n, d)
	return n
}
