//go:build !purego

package wire

import "golang.org/x/sys/cpu"

// useAVX2 says transpose8 may run here. Tests turn it off to check the
// plain loops against it.
var useAVX2 = cpu.X86.HasAVX2

// transpose8 writes blocks blocks of eight rows of the eight columns
// cols into dst, a row every stride bytes: an 8x8 transpose of float32
// per block, in AVX2 registers (interleave_amd64.s).
//
//go:noescape
func transpose8(dst *float32, stride uintptr, cols *[8]*float32, blocks int)

// interleaveWide does interleave's work for rows [r0, r1) of the columns
// it can take eight at a time, and returns how many it took (the first
// ones).
func interleaveWide(dst []float32, src [][]float32, r0, r1 int) int {
	if !useAVX2 || r1-r0 < 8 {
		return 0
	}
	j := 0
	for ; j+8 <= len(src); j += 8 {
		interleaveEight(dst, src, j, r0, r1)
	}
	return j
}

// interleaveEight is interleave of rows [r0, r1) for the eight columns
// from j: transpose8 does the whole blocks of eight rows, a plain loop
// the rest. The bounds are checked here, as transpose8 reads and writes
// through raw pointers.
func interleaveEight(dst []float32, src [][]float32, j, r0, r1 int) {
	nf := len(src)
	_ = dst[r1*nf-1]
	var cols [8]*float32
	for i := range cols {
		col := src[j+i][r0:r1]
		cols[i] = &col[0]
	}
	blocks := (r1 - r0) / 8
	transpose8(&dst[r0*nf+j], uintptr(4*nf), &cols, blocks)
	for r := r0 + 8*blocks; r < r1; r++ {
		row := dst[r*nf+j : r*nf+j+8 : r*nf+j+8]
		for i := range row {
			row[i] = src[j+i][r]
		}
	}
}
