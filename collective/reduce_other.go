//go:build !amd64 || purego

package collective

// Without vector kernels the generic loops do all the work.

func addFloat32(dst, src []float32) int               { return 0 }
func addFloat64(dst, src []float64) int               { return 0 }
func addDivFloat32(dst, src []float32, d float32) int { return 0 }
func addDivFloat64(dst, src []float64, d float64) int { return 0 }
