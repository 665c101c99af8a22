//go:build cgo

package feed

import (
	"sync/atomic"

	"github.com/DataDog/zstd"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// zstdPages is the Parquet ZSTD codec with the reference zstd library
// (libzstd, compiled into the binary by github.com/DataDog/zstd) decoding
// pages in front of arrow-go's klauspost/compress decoder: random float
// mantissas are stored as Huffman-coded literals, and libzstd's literal
// decoding takes a fifth less CPU per page. Encoding and streams are
// arrow-go's; a page libzstd does not decode into the page buffer (no
// content size in its frame, damaged data) goes to arrow-go's decoder,
// which decodes it or says what is wrong. Builds without cgo keep
// arrow-go's codec.
type zstdPages struct {
	arrowStreams // arrow-go's codec
}

// zstdFallbacks counts the pages left to arrow-go's decoder.
var zstdFallbacks atomic.Int64

// registerZstdPages puts libzstd in front of arrow-go's zstd codec
// (RegisterPageCodecs).
func registerZstdPages() {
	if orig, err := compress.GetCodec(compress.Codecs.Zstd); err == nil {
		compress.RegisterCodec(compress.Codecs.Zstd, zstdPages{arrowStreams{orig}})
	}
}

// Decode decodes one page into dst (of the page's decoded size).
func (c zstdPages) Decode(dst, src []byte) []byte {
	out, err := c.DecodeWithError(dst, src)
	if err != nil {
		panic(err)
	}
	return out
}

// DecodeWithError is Decode reporting damaged data as an error.
func (c zstdPages) DecodeWithError(dst, src []byte) ([]byte, error) {
	if len(dst) > 0 {
		if out, err := zstd.Decompress(dst, src); err == nil && len(out) == len(dst) {
			if &out[0] != &dst[0] {
				copy(dst, out) // a frame without its size: decoded elsewhere
			}
			return dst, nil
		}
	}
	zstdFallbacks.Add(1)
	return compress.Decode(c.Codec, dst, src)
}
