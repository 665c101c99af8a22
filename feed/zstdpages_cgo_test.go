//go:build cgo

package feed

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// A zstd-compressed Parquet file goes through libzstd, and the pipeline
// feeds its rows unchanged.
func TestZstdParquetPages(t *testing.T) {
	registered[zstdPages](t, compress.Codecs.Zstd)
	roundTripPages(t, compress.Codecs.Zstd, &zstdFallbacks)
}

// Pages libzstd cannot put in the page buffer go to arrow-go's decoder:
// a frame without its content size decodes all the same, damaged data is
// an error, not a panic. (A page of the wrong size the page reader
// refuses, whichever decoder.)
func TestZstdPagesOddFrames(t *testing.T) {
	zc := registered[zstdPages](t, compress.Codecs.Zstd)
	data := inflateInputs()["floats"]
	sized := zc.Encode(nil, data)

	var streamed bytes.Buffer // the streaming encoder writes no content size
	w, err := zstd.NewWriter(&streamed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		src     []byte
		size    int
		wantErr bool
	}{
		{"sized", sized, len(data), false},
		{"unsized", streamed.Bytes(), len(data), false},
		{"damaged", append(append([]byte(nil), sized[:len(sized)/2]...), bytes.Repeat([]byte{0x55}, 64)...), len(data), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := zc.DecodeWithError(make([]byte, tc.size), tc.src)
			if tc.wantErr {
				if err == nil && bytes.Equal(out, data) {
					t.Fatal("decoded a page that should have failed")
				}
				return
			}
			if err != nil || !bytes.Equal(out, data) {
				t.Fatalf("decoded %d bytes (%v), want the %d written", len(out), err, len(data))
			}
		})
	}
}

// BenchmarkZstdPages compares libzstd with arrow-go's zstd codec on one
// page of float-like bytes.
func BenchmarkZstdPages(b *testing.B) {
	data := inflateInputs()["floats"]
	c := registered[zstdPages](b, compress.Codecs.Zstd)
	benchPages(b, data, c.Encode(nil, data), "libzstd", c, c.Codec)
}
