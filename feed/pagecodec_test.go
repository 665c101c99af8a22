package feed

import (
	"bytes"
	stdgzip "compress/gzip"
	"context"
	"errors"
	"fmt"
	"github.com/spindle-ml/spindle/internal/inflate"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// inflateInputs returns data of several kinds: random bytes (stored or
// Huffman-only blocks), random float32 mantissas (what the benchmark
// files hold), repetitive text (long matches, overlapping copies), runs.
func inflateInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300_000)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	floats := make([]byte, 0, 400_000)
	for len(floats) < 400_000 {
		v := rng.Float32()
		floats = append(floats, byte(rng.Uint32()), byte(rng.Uint32()>>3), byte(int(v*255)), 0x3f)
	}
	var text bytes.Buffer
	for i := 0; text.Len() < 500_000; i++ {
		fmt.Fprintf(&text, "row %d category-%d value %.3f;", i, rng.IntN(1000), rng.Float64())
	}
	runs := bytes.Repeat([]byte{7}, 100_000)
	runs = append(runs, bytes.Repeat([]byte("ab"), 70_000)...)
	return map[string][]byte{"random": random, "floats": floats, "text": text.Bytes(), "runs": runs,
		"one byte": {42}, "empty": {}}
}

func gzipWith(t *testing.T, data []byte, level int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := stdgzip.NewWriterLevel(&buf, level)
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

// The page inflater decodes what Go's gzip and arrow-go's codec write, at
// every level, stored and Huffman-only blocks included, to the same bytes.
func TestGunzipInto(t *testing.T) {
	arrowGzip, err := compress.GetCodec(compress.Codecs.Gzip)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range inflateInputs() {
		streams := map[string][]byte{"arrow-go": arrowGzip.Encode(nil, data)}
		for _, level := range []int{stdgzip.NoCompression, stdgzip.HuffmanOnly, 1, 5, 9} {
			streams[fmt.Sprintf("level %d", level)] = gzipWith(t, data, level)
		}
		for sname, z := range streams {
			t.Run(name+"/"+sname, func(t *testing.T) {
				out := make([]byte, len(data))
				for i := range out {
					out[i] = 0xa5 // decoding must write every byte
				}
				if len(data) == 0 {
					if err := inflate.Gunzip(out, z); err != nil {
						t.Fatalf("empty stream: %v", err)
					}
					return
				}
				if err := inflate.Gunzip(out, z); err != nil {
					t.Fatalf("gunzipInto: %v", err)
				}
				if !bytes.Equal(out, data) {
					t.Fatal("decoded bytes differ")
				}
				// Through the registered codec too.
				codec, _ := compress.GetCodec(compress.Codecs.Gzip)
				got, err := compress.Decode(codec, make([]byte, len(data)), z)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("registered codec: %v", err)
				}
			})
		}
	}
}

// Damaged streams are errors (never a panic, a hang or wrong bytes), and
// the registered codec then reports arrow-go's decoder's error.
func TestGunzipIntoDamaged(t *testing.T) {
	data := inflateInputs()["text"]
	z := gzipWith(t, data, 6)
	codec, _ := compress.GetCodec(compress.Codecs.Gzip)
	rng := rand.New(rand.NewPCG(5, 6))
	tests := []struct {
		name string
		z    []byte
		n    int
	}{
		{"truncated", z[:len(z)/2], len(data)},
		{"no trailer", z[:len(z)-8], len(data)},
		{"wrong size", z, len(data) - 1},
		{"too small a destination", z, 10},
		{"not gzip", data[:1000], len(data)},
	}
	for cut := 11; cut < len(z); cut += len(z)/97 + 1 {
		tests = append(tests, struct {
			name string
			z    []byte
			n    int
		}{fmt.Sprintf("cut at %d", cut), z[:cut], len(data)})
	}
	for i := 0; i < 200; i++ {
		b := bytes.Clone(z)
		for k := 0; k < 1+i%4; k++ {
			b[10+rng.IntN(len(b)-10)] ^= byte(1 + rng.IntN(255))
		}
		tests = append(tests, struct {
			name string
			z    []byte
			n    int
		}{fmt.Sprintf("flipped %d", i), b, len(data)})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := make([]byte, tt.n)
			if err := inflate.Gunzip(out, tt.z); err == nil {
				if tt.n != len(data) || !bytes.Equal(out, data) {
					t.Fatal("damaged stream decoded without an error to other bytes")
				}
				return // a flip in an unused bit (the header's mtime, say)
			}
			if _, err := compress.Decode(codec, make([]byte, tt.n), tt.z); err == nil && tt.n != len(data) {
				t.Fatal("the registered codec decoded a stream to the wrong size")
			}
		})
	}
}

// FuzzGunzipInto feeds the inflater arbitrary bytes behind a gzip
// header: it must return, without a panic, and decode nothing wrong.
func FuzzGunzipInto(f *testing.F) {
	for _, data := range inflateInputs() {
		if len(data) > 0 && len(data) < 200_000 {
			f.Add(gzipWith(&testing.T{}, data[:min(len(data), 5000)], 6), uint16(min(len(data), 5000)))
		}
	}
	f.Fuzz(func(t *testing.T, z []byte, n uint16) {
		out := make([]byte, n)
		if err := inflate.Gunzip(out, z); err == nil {
			// The CRC matched: arrow-go's decoder must agree.
			under := registered[gzipPages](t, compress.Codecs.Gzip).Codec
			want, err := compress.Decode(under, make([]byte, n), z)
			if err != nil || !bytes.Equal(want, out) {
				t.Fatalf("decoded %d bytes that arrow-go's decoder does not (%v)", n, err)
			}
		}
	})
}

// A gzip-compressed Parquet file goes through the registered codec's
// page inflater, and the pipeline feeds its rows unchanged.
func TestGzipParquetPages(t *testing.T) {
	registered[gzipPages](t, compress.Codecs.Gzip)
	roundTripPages(t, compress.Codecs.Gzip, &gzipFallbacks)
}

// registered returns the codec registered for c, failing unless it is
// Spindle's page decoder T.
func registered[T compress.Codec](tb testing.TB, c compress.Compression) T {
	tb.Helper()
	codec, err := compress.GetCodec(c)
	if err != nil {
		tb.Fatal(err)
	}
	ours, ok := codec.(T)
	if !ok {
		tb.Fatalf("the registered %s codec is %T, not Spindle's page decoder", c, codec)
	}
	return ours
}

// roundTripPages writes a Parquet file compressed with codec, feeds it
// through the pipeline and checks every row, and that no page went to
// arrow-go's decoder (fallbacks).
func roundTripPages(t *testing.T, codec compress.Compression, fallbacks *atomic.Int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pages.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(3000), parquet.WithCompression(codec))
	w, err := pqarrow.NewFileWriter(testSchema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	const rows = 10_000
	writeBatches(t, w, testSchema, 0, rows, 1000)
	f.Close()
	before := fallbacks.Load()
	ctx := context.Background()
	p := plannedPipeline(t, newResolver(), path, PipelineConfig{BatchRows: 700, Prefetch: 2, EvenBatches: EvenOff})
	defer p.Close()
	r, err := p.Epoch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen int64
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		want := testRecord(testSchema, seen, rec.NumRows())
		for c := 0; c < int(rec.NumCols()); c++ {
			if !array.Equal(expand(t, rec.Column(c)), want.Column(c)) {
				t.Fatalf("rows from %d: column %s differs", seen, rec.ColumnName(c))
			}
		}
		seen += rec.NumRows()
		want.Release()
		rec.Release()
	}
	if seen != rows {
		t.Fatalf("read %d rows, want %d", seen, rows)
	}
	if n := fallbacks.Load() - before; n != 0 {
		t.Errorf("%d pages went to arrow-go's decoder, want none", n)
	}
}

// BenchmarkGunzip compares the page inflater with arrow-go's gzip codec
// on one gzip stream of float-like bytes.
func BenchmarkGunzip(b *testing.B) {
	data := inflateInputs()["floats"]
	var buf bytes.Buffer
	w, _ := stdgzip.NewWriterLevel(&buf, 6)
	if _, err := w.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	c := registered[gzipPages](b, compress.Codecs.Gzip)
	benchPages(b, data, buf.Bytes(), "spindle", c, c.Codec)
}

// benchPages times decoding page z (of data) with Spindle's codec ours,
// under the name name, and with arrow-go's codec under it.
func benchPages(b *testing.B, data, z []byte, name string, ours, arrowGo compress.Codec) {
	out := make([]byte, len(data))
	for _, bb := range []struct {
		name  string
		codec compress.Codec
	}{{name, ours}, {"arrow-go", arrowGo}} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for range b.N {
				if _, err := compress.Decode(bb.codec, out, z); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Importing feed leaves arrow-go's codecs as they are: Spindle's page
// decoders replace them only when the program asks (RegisterPageCodecs,
// from the spindle binary's main), as TestMain does after noting what
// arrow-go held.
func TestImportLeavesCodecsAlone(t *testing.T) {
	for _, c := range []compress.Codec{startGzip, startZstd} {
		switch c.(type) {
		case gzipPages:
			t.Errorf("importing feed registered its gzip page decoder")
		case nil:
			t.Errorf("arrow-go had no codec before RegisterPageCodecs")
		}
		if fmt.Sprintf("%T", c) == "feed.zstdPages" {
			t.Errorf("importing feed registered its zstd page decoder")
		}
	}
	RegisterPageCodecs() // a second call changes nothing
	registered[gzipPages](t, compress.Codecs.Gzip)
}
