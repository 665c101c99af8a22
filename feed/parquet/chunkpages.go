package parquet

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// ChunkWindow is how much of a local file's column chunk chunkPages
// reads at once: a whole chunk up to it (one read per chunk where row
// groups are small), and pages larger than it whole. A remote file's
// chunks are read whole, each with one request.
var ChunkWindow = 1 << 20 // a variable for tests

// wholeChunks, as a chunkPages window, reads each column chunk whole with
// one read, and leaves no page in the file (a remote file's round trips
// cost more than copies).
const WholeChunks = math.MaxInt

// maxPageHeader bounds a page header, as arrow-go's reader does.
const maxPageHeader = 16 << 20

// DirectPageMin is the size from which an uncompressed, plainly encoded
// data page is not read into the window: its values are read from the file
// straight into the batches' buffers (flatColumn.startDirect), which
// saves copying them out of the window. The copy reads what is in cache
// already, so one thread gains little; two share the memory bus, and a
// pass over an uncompressed file with them took a fifth less time. After
// such a page, the window reads only headerProbe bytes for the next
// header and levels, not a window ahead.
const DirectPageMin = 64 << 10

// headerProbe is how much a window reads after a page left in the file
// (DirectPageMin): the next header and levels.
const headerProbe = 8 << 10

// A compressed chunk's window buffer of at least spentWindowMin bytes
// goes back to the allocator as soon as the pages in it are decompressed
// out of it (at the latest, at the chunk's end). On the 17-column
// benchmark files (1 MiB windows, each holding a chunk of about 460 kB)
// that made later epochs 2-10% faster at 1 thread, and at 2 up to a
// fifth faster (snappy; dictionary strings 13%). Smaller windows stay in
// a core's cache anyway: with row groups of 8192 rows (32 kB chunks),
// giving each back made 2 threads 3-8% slower, the pool's lock taken
// twice per chunk.
const spentWindowMin = 256 << 10

// chunkPages reads the data pages of column chunks, one chunk after
// another, for flatColumns: a window of the chunk's bytes at a time
// into a buffer from the allocator, each page header parsed there and
// each page decompressed into a second buffer (an uncompressed page is
// used where it lies in the window). The page buffer is reused from page
// to page unless handed out (sharePage); the window is reused while its
// pages are used where they lie, and a large one goes back to the
// allocator once the pages in it are decompressed out of it
// (spentWindowMin). arrow-go's page reader does the same work with a
// fresh 16 KiB buffer per chunk and a copy of every page body, which on
// files of many small row groups costs more than the pages' values.
type chunkPages struct {
	src    io.ReaderAt
	window int // bytes read at once, at least
	alloc  memory.Allocator

	start, end int64 // the chunk's bytes in src
	pos        int64 // the next page header
	codec      compress.Codec
	plain      bool // uncompressed

	win    *memory.Buffer // src's bytes [winAt, winAt+winLen)
	winAt  int64
	winLen int
	page   *memory.Buffer // the current page, decompressed

	// The page next returned last, when it left the page's body in src
	// (deferred): the body's offset and length.
	bodyAt  int64
	bodyLen int
	// probe: the next page may be one to leave in src (the last data
	// page was, or the chunk starts), so the next header is read with
	// headerProbe bytes rather than a window ahead.
	probe bool
	// inPage: the page next returned last is in page. shared: page was
	// handed out (sharePage), so the next page needs a buffer of its own.
	inPage, shared bool
}

func newChunkPages(src io.ReaderAt, window int, alloc memory.Allocator) *chunkPages {
	return &chunkPages{src: src, window: window, alloc: alloc, win: memory.NewResizableBuffer(alloc), page: memory.NewResizableBuffer(alloc)}
}

// reset starts on the chunk of length bytes at start, compressed with
// codec.
func (c *chunkPages) reset(start, length int64, codec compress.Compression) error {
	cd, err := compress.GetCodec(codec)
	if err != nil {
		return err
	}
	c.start, c.end, c.pos = start, start+length, start
	c.codec, c.plain = cd, codec == compress.Codecs.Uncompressed
	c.winLen, c.bodyLen = 0, 0
	// An uncompressed chunk large enough may hold pages to leave in src:
	// its first header is read with a probe, not a window ahead.
	c.probe = c.plain && length >= DirectPageMin && c.window != WholeChunks
	return nil
}

// release frees the buffers.
func (c *chunkPages) release() {
	c.win.Release()
	c.page.Release()
}

// next returns the chunk's next data or dictionary page's header and its
// bytes, decompressed, valid until the next call; io.EOF after the last.
// It skips index pages. Of a large uncompressed page stored plainly that
// the window does not hold, it returns only the first bytes the window
// has (at least the header's, up to headerProbe), and deferred says
// where the rest is.
func (c *chunkPages) next() (pageHeader, []byte, error) {
	c.bodyLen, c.inPage = 0, false
	for {
		if c.pos >= c.end {
			return pageHeader{}, nil, io.EOF
		}
		h, n, err := c.header()
		if err != nil {
			return h, nil, err
		}
		at := c.pos + int64(n)
		if int64(h.compressedSize) > c.end-at {
			return h, nil, fmt.Errorf("a page of %d bytes at offset %d runs past its column chunk's end (%d)", h.compressedSize, c.pos, c.end)
		}
		c.pos = at + int64(h.compressedSize)
		switch h.typ {
		case pageIndex:
			continue
		case pageData, pageDataV2, pageDictionary:
		default:
			continue // unknown page types are skipped, as the format asks
		}
		if size := int(h.compressedSize); c.leaveInSrc(h, at) {
			c.probe, c.bodyAt, c.bodyLen = true, at, size
			prefix, err := c.bytes(at, min(headerProbe, size), headerProbe)
			return h, prefix, err
		}
		if h.typ != pageDictionary {
			c.probe = false
		}
		body, err := c.bytes(at, int(h.compressedSize), c.window)
		if err != nil {
			return h, nil, err
		}
		data, err := c.decompress(h, body)
		if err == nil && c.pos >= c.winAt+int64(c.winLen) && (c.win.Cap() >= spentWindowMin || len(body) > c.window) &&
			len(data) > 0 && &data[0] != &body[0] {
			// The window's last page, decompressed out of it: its bytes
			// are spent, so give the buffer back now rather than hold it
			// until the column's next read. Columns then take turns with
			// the few large buffers the pool hands out last, which the
			// cache still holds, instead of keeping one each (a window
			// per column of a wide file is more than a core's cache); and
			// a page larger than the window (a writer may put a whole row
			// group's column in one) is not held for as long as the page.
			c.win.Release()
			c.win, c.winLen = memory.NewResizableBuffer(c.alloc), 0
		}
		return h, data, err
	}
}

// leaveInSrc reports whether the page with header h, whose body is at at,
// is one to leave in src: a large uncompressed data page stored plainly
// that the window does not hold.
func (c *chunkPages) leaveInSrc(h pageHeader, at int64) bool {
	size := int(h.compressedSize)
	return c.plain && c.window != WholeChunks && h.typ != pageDictionary && h.encoding == int32(parquet.Encodings.Plain) &&
		size >= DirectPageMin && size == int(h.uncompressedSize) && at+int64(size) > c.winAt+int64(c.winLen)
}

// sharePage returns the buffer holding the page next returned last, when
// it was decompressed into one, for the caller to slice and retain
// (memory.SliceBuffer): the next page is decompressed into a new buffer.
func (c *chunkPages) sharePage() *memory.Buffer {
	if !c.inPage {
		return nil
	}
	c.shared = true
	return c.page
}

// deferred returns where the body of the page next returned last is in
// src, when it was left there.
func (c *chunkPages) deferred() (at int64, n int, ok bool) {
	return c.bodyAt, c.bodyLen, c.bodyLen > 0
}

// load reads the body of a page left in src (deferred) and returns it.
func (c *chunkPages) load() ([]byte, error) {
	if c.bodyLen == 0 {
		return nil, errors.New("no page left in the file to load")
	}
	at, n := c.bodyAt, c.bodyLen
	c.bodyLen = 0
	return c.bytes(at, n, c.window)
}

// header parses the page header at pos, reading more of the chunk when
// the window ends within it.
func (c *chunkPages) header() (pageHeader, int, error) {
	need := int(min(c.end-c.pos, 256))
	ahead := c.window
	if c.probe {
		ahead = headerProbe
	}
	for {
		if _, err := c.bytes(c.pos, need, ahead); err != nil {
			return pageHeader{}, 0, err
		}
		b := c.win.Bytes()[c.pos-c.winAt : c.winLen] // all the window has from pos
		h, n, err := parsePageHeader(b)
		if errors.Is(err, errShortHeader) && int64(len(b)) < c.end-c.pos && len(b) < maxPageHeader {
			need = int(min(c.end-c.pos, int64(2*len(b))))
			continue
		}
		if err != nil {
			return h, 0, fmt.Errorf("page header at offset %d: %w", c.pos, err)
		}
		return h, n, nil
	}
}

// bytes returns src's n bytes at at, within the chunk, reading the
// window anew from at, ahead bytes or n, when they are not all in it.
func (c *chunkPages) bytes(at int64, n, ahead int) ([]byte, error) {
	if at >= c.winAt && at+int64(n) <= c.winAt+int64(c.winLen) {
		off := int(at - c.winAt)
		return c.win.Bytes()[off : off+n], nil
	}
	size := int(min(int64(max(n, ahead)), c.end-at))
	if size < n {
		return nil, fmt.Errorf("%d bytes at offset %d run past the column chunk's end (%d)", n, at, c.end)
	}
	c.win.ResizeNoShrink(size)
	buf := c.win.Bytes()[:size]
	if err := ReadAt(c.src, buf, at); err != nil {
		c.winLen = 0
		return nil, err
	}
	c.winAt, c.winLen = at, size
	return buf[:n], nil
}

// decompress returns the page's levels and values uncompressed.
func (c *chunkPages) decompress(h pageHeader, body []byte) ([]byte, error) {
	size := int(h.uncompressedSize)
	levels := 0
	if h.typ == pageDataV2 {
		levels = int(h.defLen) + int(h.repLen)
		if levels > len(body) || levels > size {
			return nil, fmt.Errorf("a page's levels (%d bytes) are longer than the page", levels)
		}
		if !h.compressed {
			levels = len(body)
		}
	}
	if c.plain || levels == len(body) {
		if len(body) != size {
			return nil, fmt.Errorf("an uncompressed page of %d bytes says it holds %d", len(body), size)
		}
		return body, nil
	}
	if c.shared {
		c.page.Release()
		c.page, c.shared = memory.NewResizableBuffer(c.alloc), false
	}
	c.page.ResizeNoShrink(size)
	out := c.page.Bytes()[:size]
	c.inPage = true
	copy(out, body[:levels])
	values, err := compress.Decode(c.codec, out[levels:], body[levels:])
	if err != nil {
		return nil, fmt.Errorf("decompress a page: %w", err)
	}
	if len(values) != size-levels {
		return nil, fmt.Errorf("a page decompressed to %d bytes, its header says %d", levels+len(values), size)
	}
	if len(values) > 0 && &values[0] != &out[levels] {
		copy(out[levels:], values)
	}
	return out, nil
}
