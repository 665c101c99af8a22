package inflate

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"testing"
)

// inputs holds data of several kinds: random bytes (stored and
// Huffman-only blocks), text (long and overlapping matches), runs.
func inputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	random := make([]byte, 200_000)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	var text bytes.Buffer
	for i := 0; text.Len() < 300_000; i++ {
		fmt.Fprintf(&text, "row %d category-%d value %.3f;", i, rng.IntN(1000), rng.Float64())
	}
	runs := append(bytes.Repeat([]byte{7}, 70_000), bytes.Repeat([]byte("ab"), 50_000)...)
	return map[string][]byte{"random": random, "text": text.Bytes(), "runs": runs, "one byte": {42}, "empty": {}}
}

func gzipped(t *testing.T, data []byte, level int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, level)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Gunzip decodes what Go's gzip writes at every level to the same bytes.
func TestGunzipDecodesGoGzip(t *testing.T) {
	for name, data := range inputs() {
		for _, level := range []int{flate.NoCompression, flate.HuffmanOnly, flate.BestSpeed, flate.DefaultCompression, flate.BestCompression} {
			t.Run(fmt.Sprintf("%s/%d", name, level), func(t *testing.T) {
				out := make([]byte, len(data))
				if err := Gunzip(out, gzipped(t, data, level)); err != nil {
					t.Fatalf("Gunzip: %v", err)
				}
				if !bytes.Equal(out, data) {
					t.Fatal("decoded bytes differ from the input")
				}
			})
		}
	}
}

// Damaged or mis-sized streams are errors, never a panic or wrong bytes
// passed off as right.
func TestGunzipRefusesDamage(t *testing.T) {
	data := inputs()["text"]
	z := gzipped(t, data, flate.DefaultCompression)
	flipped := bytes.Clone(z)
	flipped[len(flipped)/2] ^= 0x40
	for _, tc := range []struct {
		name string
		out  int
		z    []byte
	}{
		{"a flipped bit", len(data), flipped},
		{"truncated", len(data), z[:len(z)-9]},
		{"two members", len(data) * 2, append(bytes.Clone(z), z...)},
		{"a smaller size", len(data) - 1, z},
		{"a larger size", len(data) + 1, z},
		{"not gzip", 20, bytes.Repeat([]byte{1}, 30)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Gunzip(make([]byte, tc.out), tc.z); err == nil {
				t.Fatal("Gunzip took damaged data")
			}
		})
	}
}
