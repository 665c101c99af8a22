package collective

import (
	"fmt"
	"math"
	"testing"
)

// TestKernelsMatchGeneric checks the vector kernels against the plain Go
// loops bit for bit, at every length around the vector and unroll widths,
// so that results never depend on which kernel ran.
func TestKernelsMatchGeneric(t *testing.T) {
	t.Run("float32", func(t *testing.T) { checkKernels[float32](t) })
	t.Run("float64", func(t *testing.T) { checkKernels[float64](t) })
}

func checkKernels[T Float](t *testing.T) {
	for n := 0; n <= 80; n++ {
		for _, div := range []T{3, 7} {
			t.Run(fmt.Sprintf("n=%d/div=%v", n, div), func(t *testing.T) {
				src := inputs[T](1, n)
				base := inputs[T](2, n)

				got, want := append([]T(nil), base...), append([]T(nil), base...)
				add(got, src)
				addGeneric(want, src)
				sameBits(t, "add", got, want)

				got, want = append([]T(nil), base...), append([]T(nil), base...)
				addDiv(got, src, div)
				addDivGeneric(want, src, div)
				sameBits(t, "addDiv", got, want)
			})
		}
	}
}

func sameBits[T Float](t *testing.T, what string, got, want []T) {
	t.Helper()
	for i := range want {
		if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
			t.Fatalf("%s: element %d of %d = %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
}

func BenchmarkAdd(b *testing.B) {
	for _, kb := range []int{256, 16 << 10} {
		dst := make([]float32, kb<<10/4)
		src := make([]float32, len(dst))
		b.Run(fmt.Sprintf("float32/KiB=%d/kernel", kb), func(b *testing.B) {
			b.SetBytes(int64(kb << 10))
			for range b.N {
				add(dst, src)
			}
		})
		b.Run(fmt.Sprintf("float32/KiB=%d/generic", kb), func(b *testing.B) {
			b.SetBytes(int64(kb << 10))
			for range b.N {
				addGeneric(dst, src)
			}
		})
	}
}
