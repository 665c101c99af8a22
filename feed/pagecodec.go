package feed

import (
	"github.com/spindle-ml/spindle/internal/inflate"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// gzipPages is the Parquet GZIP codec with Spindle's page decoding
// (inflate.Gunzip) in front of arrow-go's: encoding and streams are arrow-go's,
// and a page that inflate.Gunzip does not decode (more than one gzip member,
// no known size, damaged data) goes to arrow-go's decoder, which decodes
// it or says what is wrong. RegisterPageCodecs registers it with
// arrow-go's compress.RegisterCodec, its way of replacing a codec.
type gzipPages struct {
	arrowStreams // arrow-go's codec
}

// arrowStreams is a Parquet codec of arrow-go's, whose streams (which
// page decoding does not use) the codecs in front of it keep.
type arrowStreams struct {
	compress.Codec
}

// NewReader is arrow-go's.
func (c arrowStreams) NewReader(r io.Reader) io.ReadCloser {
	return c.Codec.(compress.StreamingCodec).NewReader(r)
}

// NewWriter is arrow-go's.
func (c arrowStreams) NewWriter(w io.Writer) io.WriteCloser {
	return c.Codec.(compress.StreamingCodec).NewWriter(w)
}

// NewWriterLevel is arrow-go's.
func (c arrowStreams) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return c.Codec.(compress.StreamingCodec).NewWriterLevel(w, level)
}

// gzipFallbacks counts the pages left to arrow-go's decoder.
var gzipFallbacks atomic.Int64

// RegisterPageCodecs puts Spindle's page decoders in front of arrow-go's
// Parquet codecs: gzip (internal/inflate) and, in builds with cgo, zstd
// (libzstd). arrow-go keeps one table of codecs for the whole process, so
// replacing one is the program's choice, made once at start-up (the
// spindle binary's main), never a side effect of importing feed. Calls
// after the first do nothing. A codec arrow-go lacks is left alone.
func RegisterPageCodecs() {
	registerOnce.Do(func() {
		if orig, err := compress.GetCodec(compress.Codecs.Gzip); err == nil {
			compress.RegisterCodec(compress.Codecs.Gzip, gzipPages{arrowStreams{orig}})
		}
		registerZstdPages()
	})
}

var registerOnce sync.Once

// Decode decodes one page into dst (of the page's decoded size).
func (c gzipPages) Decode(dst, src []byte) []byte {
	out, err := c.DecodeWithError(dst, src)
	if err != nil {
		panic(err)
	}
	return out
}

// DecodeWithError is Decode reporting damaged data as an error.
func (c gzipPages) DecodeWithError(dst, src []byte) ([]byte, error) {
	if len(dst) > 0 && inflate.Gunzip(dst, src) == nil {
		return dst, nil
	}
	gzipFallbacks.Add(1)
	return compress.Decode(c.Codec, dst, src)
}
