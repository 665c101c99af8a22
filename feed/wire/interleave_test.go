package wire

import (
	"fmt"
	"testing"
)

// interleave, with and without the vector kernel, writes exactly the rows
// asked for, for column counts around the kernel's eight and row ranges
// that start and end anywhere.
func TestInterleaveMatchesReference(t *testing.T) {
	const rows, pad = 1000, 16
	const untouched = float32(-1)
	kernels := []bool{false}
	if useAVX2 {
		kernels = append(kernels, true)
	}
	defer func(v bool) { useAVX2 = v }(useAVX2)
	for _, avx := range kernels {
		useAVX2 = avx
		for _, nf := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 24, 33} {
			src := make([][]float32, nf)
			for j := range src {
				src[j] = make([]float32, rows)
				for r := range src[j] {
					src[j][r] = float32(r*nf + j)
				}
			}
			for _, span := range [][2]int{{0, rows}, {0, 7}, {3, 11}, {5, 900}, {255, 513}, {999, 1000}, {1, 999}} {
				t.Run(fmt.Sprintf("avx2=%v/cols=%d/rows=%d-%d", avx, nf, span[0], span[1]), func(t *testing.T) {
					buf := make([]float32, rows*nf+2*pad)
					for i := range buf {
						buf[i] = untouched
					}
					interleave(buf[pad:pad+rows*nf], src, span[0], span[1])
					for i, v := range buf {
						want := untouched
						if at := i - pad; at >= span[0]*nf && at < span[1]*nf {
							want = float32(at)
						}
						if v != want {
							t.Fatalf("value %d (row %d, column %d) is %v, want %v", i-pad, (i-pad)/nf, (i-pad)%nf, v, want)
						}
					}
				})
			}
		}
	}
}

// On a CPU with AVX2 the kernel takes the columns eight at a time.
func TestInterleaveWideTakesEightAtATime(t *testing.T) {
	if !useAVX2 {
		t.Skip("no vector kernel for this CPU")
	}
	src := make([][]float32, 19)
	for j := range src {
		src[j] = make([]float32, 64)
	}
	if got := interleaveWide(make([]float32, 64*19), src, 0, 64); got != 16 {
		t.Fatalf("the kernel took %d of 19 columns, want 16", got)
	}
}
