package parquet

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// packIndices writes values as the RLE/bit-packed hybrid of width bits:
// one bit-packed run of them (padded to groups of eight), then a run of
// repeat copies of last.
func packIndices(width uint, values []uint32, repeat int, last uint32) []byte {
	out := []byte{byte(width)}
	groups := (len(values) + 7) / 8
	out = binary.AppendUvarint(out, uint64(groups)<<1|1)
	packed := make([]byte, groups*int(width))
	for i, v := range values {
		for b := uint(0); b < width; b++ {
			if v>>b&1 == 1 {
				bit := uint(i)*width + b
				packed[bit/8] |= 1 << (bit % 8)
			}
		}
	}
	out = append(out, packed...)
	out = binary.AppendUvarint(out, uint64(repeat)<<1)
	for i := uint(0); i < (width+7)/8; i++ {
		out = append(out, byte(last>>(8*i)))
	}
	return out
}

// TestDictIndices decodes hand-packed indices of every bit width, in
// reads of every size, and refuses damaged ones without panicking.
func TestDictIndices(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for width := uint(0); width <= 32; width++ {
		values := make([]uint32, 45)
		for i := range values {
			if width > 0 {
				values[i] = uint32(rng.Uint64() & (1<<width - 1))
			}
		}
		last := uint32(0)
		if width > 0 {
			last = uint32(1<<width - 1)
		}
		b := packIndices(width, values, 9, last)
		want := append(slices.Clone(values), last, last, last, last, last, last, last, last, last)
		// The bit-packed run's padding (three values) is read as values
		// of the page only if the page asks for them; it does not here,
		// so the reads skip ahead by reading 48 and dropping three.
		for _, step := range []int{1, 3, 8, 50} {
			var d dictIndices
			if err := d.reset(b); err != nil {
				t.Fatal(err)
			}
			var got []uint32
			for len(got) < 48+9 {
				n := min(step, 48+9-len(got))
				out := make([]uint32, n)
				if err := d.next(out); err != nil {
					t.Fatalf("width %d, step %d, after %d: %v", width, step, len(got), err)
				}
				got = append(got, out...)
			}
			got = append(got[:45], got[48:]...)
			if !slices.Equal(got, want) {
				t.Fatalf("width %d, step %d:\n got %v\nwant %v", width, step, got, want)
			}
		}
	}

	var d dictIndices
	if err := d.reset([]byte{33}); err == nil {
		t.Error("a bit width of 33 accepted")
	}
	if err := d.reset(nil); err == nil {
		t.Error("no bit width accepted")
	}
	for i := 0; i < 5000; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if len(b) > 0 {
			b[0] %= 33
		}
		if d.reset(b) == nil {
			d.next(make([]uint32, rng.IntN(100)))
		}
	}
	if err := gather(make([]byte, 8), make([]byte, 8), []uint32{1, 2}, 4); err == nil {
		t.Error("an index past the dictionary's end gathered")
	}
}
