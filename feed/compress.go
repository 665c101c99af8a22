package feed

import (
	"bufio"
	"compress/bzip2"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// codec is a whole-file compression Hadoop writes text files with, known
// by the file name's extension (as Hadoop's CompressionCodecFactory
// finds it).
type codec struct {
	ext  string // with the dot
	name string // Hadoop's codec class, for messages
	// open returns a reader of the decompressed text; nil when Spindle
	// cannot read the codec.
	open func(r io.Reader) (io.ReadCloser, error)
	why  string // why it cannot be read, when open is nil
}

var codecs = []codec{
	{ext: ".gz", name: "GzipCodec", open: func(r io.Reader) (io.ReadCloser, error) { return gzip.NewReader(r) }},
	{ext: ".bz2", name: "BZip2Codec", open: func(r io.Reader) (io.ReadCloser, error) { return io.NopCloser(bzip2.NewReader(r)), nil }},
	{ext: ".deflate", name: "DefaultCodec", open: func(r io.Reader) (io.ReadCloser, error) { return zlib.NewReader(r) }},
	{ext: ".zst", name: "ZStandardCodec", open: func(r io.Reader) (io.ReadCloser, error) {
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}},
	{ext: ".snappy", name: "SnappyCodec", why: "Hadoop frames Snappy in its own blocks, which Spindle does not read"},
	{ext: ".lz4", name: "Lz4Codec", why: "Hadoop frames LZ4 in its own blocks, which Spindle does not read"},
	{ext: ".lzo", name: "LzoCodec", why: "LZO is not read by Spindle"},
	{ext: ".lzo_deflate", name: "LzoCodec", why: "LZO is not read by Spindle"},
	{ext: ".br", name: "Brotli", why: "Brotli is not read by Spindle"},
	{ext: ".xz", name: "XZ", why: "XZ is not read by Spindle"},
}

// codecOf returns the compression a file name's extension names, or nil.
func codecOf(name string) *codec {
	ext := strings.ToLower(path.Ext(name))
	for i := range codecs {
		if codecs[i].ext == ext {
			return &codecs[i]
		}
	}
	return nil
}

// trimCodec returns name without a compression extension.
func trimCodec(name string) string {
	if c := codecOf(name); c != nil {
		return name[:len(name)-len(c.ext)]
	}
	return name
}

// CompressionOf names the compression of a file by its extension ("gzip"
// style Hadoop codec names), or "" when the name says none.
func CompressionOf(name string) string {
	if c := codecOf(name); c != nil {
		return c.name
	}
	return ""
}

// csvFile is what the CSV reader reads: a file, or the decompressed text
// of a compressed one (whose Size is -1).
type csvFile interface {
	io.ReaderAt
	Size() int64
	Close() error
}

// csvInput returns the text of a CSV file: f itself, or a reader of its
// decompressed text when its name ends with a compression extension. An
// unreadable compression, or compressed bytes under a plain name, is an
// ErrInput error naming the file and the codec.
func csvInput(f csvFile, uri string) (csvFile, error) {
	c := codecOf(uri)
	if c == nil {
		var magic [4]byte
		n, _ := f.ReadAt(magic[:], 0)
		if kind := sniffCompression(magic[:n]); kind != "" {
			return nil, fmt.Errorf("%w: %s starts like a %s file but its name has no compression extension: "+
				"name it .csv%s so it is decompressed, or decompress it", ErrInput, uri, kind, sniffExt(kind))
		}
		return f, nil
	}
	if c.open == nil {
		return nil, fmt.Errorf("%w: %s: compressed with %s (%s): %s; decompress it or recompress it with gzip, bzip2 or zstd",
			ErrInput, uri, c.name, c.ext, c.why)
	}
	return &streamFile{f: f, uri: uri, codec: c}, nil
}

// sniffCompression names the compression whose magic bytes b starts with.
func sniffCompression(b []byte) string {
	switch {
	case len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b:
		return "gzip"
	case len(b) >= 3 && string(b[:3]) == "BZh":
		return "bzip2"
	case len(b) >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd:
		return "zstd"
	}
	return ""
}

func sniffExt(kind string) string {
	return map[string]string{"gzip": ".gz", "bzip2": ".bz2", "zstd": ".zst"}[kind]
}

// streamFile reads the decompressed text of a compressed file at offsets
// that mostly move forward (as the CSV parser reads): reading behind the
// current position starts decompressing again from the beginning.
type streamFile struct {
	f     csvFile
	uri   string
	codec *codec
	r     io.ReadCloser
	br    *bufio.Reader
	pos   int64 // offset of the next decompressed byte r yields
}

func (s *streamFile) Size() int64 { return -1 }

func (s *streamFile) restart() error {
	if s.r != nil {
		_ = s.r.Close()
		s.r = nil
	}
	s.br = bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.f.Size()), 256<<10)
	r, err := s.codec.open(s.br)
	if err != nil {
		return fmt.Errorf("%w: %s: not readable as %s (%s): %w", ErrInput, s.uri, s.codec.name, s.codec.ext, err)
	}
	s.r, s.pos = r, 0
	return nil
}

func (s *streamFile) ReadAt(p []byte, off int64) (int, error) {
	if s.r == nil || off < s.pos {
		if err := s.restart(); err != nil {
			return 0, err
		}
	}
	if off > s.pos {
		n, err := io.CopyN(io.Discard, s.r, off-s.pos)
		s.pos += n
		if err != nil {
			return 0, s.wrap(err)
		}
	}
	// Fill p or reach the end; only the decompressor's own io.EOF is the
	// end (a truncated stream reports io.ErrUnexpectedEOF, an error).
	n := 0
	for n < len(p) {
		m, err := s.r.Read(p[n:])
		n += m
		s.pos += int64(m)
		if err != nil {
			return n, s.wrap(err)
		}
	}
	return n, nil
}

func (s *streamFile) wrap(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	return fmt.Errorf("%w: %s: decompress (%s): %w", ErrInput, s.uri, s.codec.name, err)
}

// closeStream stops decompressing, leaving the file open.
func (s *streamFile) closeStream() {
	if s.r != nil {
		_ = s.r.Close()
		s.r = nil
	}
}

// Close stops decompressing and closes the file.
func (s *streamFile) Close() error {
	s.closeStream()
	return s.f.Close()
}
