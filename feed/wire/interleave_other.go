//go:build !amd64 || purego

package wire

// useAVX2 is false: there is no vector kernel on this platform.
var useAVX2 = false

// interleaveWide has no vector kernel to run here: interleave's plain
// loops take every column.
func interleaveWide(dst []float32, src [][]float32, r0, r1 int) int { return 0 }
