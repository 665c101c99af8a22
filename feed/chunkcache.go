package feed

import (
	"io"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	feedpq "github.com/spindle-ml/spindle/feed/parquet"
	"github.com/spindle-ml/spindle/fsys"
)

// chunkCache stands between a remote file and the Parquet reader. The
// reader fetches a column chunk's pages with many small reads; on HDFS
// each would be a round trip to a datanode. So the first read that falls
// inside one of the split's column chunks fetches the whole chunk with a
// single ReadAt into a buffer from the pipeline's allocator, and later
// reads inside it are served from memory. A chunk's buffer is freed as
// soon as every byte of it has been served (the reader reads each byte
// once, front to back) and, at the latest, by release. Reads outside the
// known chunks (the footer) go to the file.
//
// arrow-go's own whole-chunk reading (BufferedStreamEnabled off) does the
// same with a fresh, zeroed buffer per chunk; this one comes from the
// pool and costs neither the zeroing nor a garbage collection.
type chunkCache struct {
	fsys.File
	alloc memory.Allocator

	mu     sync.RWMutex   // guards chunks; each chunk guards its state
	chunks []*cachedChunk // sorted by off, not overlapping
}

type cachedChunk struct {
	off, length int64

	// mu is held while the chunk is fetched, so that reads of other
	// chunks (by other decode goroutines) go on meanwhile.
	mu     sync.Mutex
	buf    []byte // nil until fetched, and again once freed
	served int64  // bytes handed out of buf
	done   bool   // fetched and freed: later reads go to the file
}

func newChunkCache(f fsys.File, alloc memory.Allocator) *chunkCache {
	return &chunkCache{File: f, alloc: alloc}
}

// addChunks registers the byte ranges of the column chunks of the given
// leaf columns in the given row groups, as arrow-go computes them.
func (c *chunkCache) addChunks(pf *file.Reader, rowGroups, leaves []int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	md := pf.MetaData()
	for _, rg := range rowGroups {
		rgmd := md.RowGroup(rg)
		for _, leaf := range leaves {
			cc, err := rgmd.ColumnChunk(leaf)
			if err != nil {
				return err
			}
			start := feedpq.ChunkStart(cc)
			// A range past the end of the file (a damaged footer) is
			// left to the file, which will say what is wrong with it.
			if n := cc.TotalCompressedSize(); start >= 0 && n > 0 && start+n <= c.File.Size() {
				c.chunks = append(c.chunks, &cachedChunk{off: start, length: n})
			}
		}
	}
	sort.Slice(c.chunks, func(i, j int) bool { return c.chunks[i].off < c.chunks[j].off })
	// Drop any chunk overlapping its predecessor (a damaged footer):
	// reads inside it simply go to the file.
	out := c.chunks[:0]
	for _, ch := range c.chunks {
		if len(out) > 0 && ch.off < out[len(out)-1].off+out[len(out)-1].length {
			continue
		}
		out = append(out, ch)
	}
	c.chunks = out
	return nil
}

// ReadAt serves p from a cached chunk when p lies inside one, fetching
// the chunk first if need be, and from the file otherwise.
func (c *chunkCache) ReadAt(p []byte, off int64) (int, error) {
	c.mu.RLock()
	i := sort.Search(len(c.chunks), func(i int) bool { return c.chunks[i].off+c.chunks[i].length > off })
	var ch *cachedChunk
	if i < len(c.chunks) && len(p) > 0 && off >= c.chunks[i].off && off+int64(len(p)) <= c.chunks[i].off+c.chunks[i].length {
		ch = c.chunks[i]
	}
	c.mu.RUnlock()
	if ch == nil {
		return c.File.ReadAt(p, off)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.done {
		return c.File.ReadAt(p, off)
	}
	if ch.buf == nil {
		buf := c.alloc.Allocate(int(ch.length))
		if feedpq.ReadAt(c.File, buf, ch.off) != nil {
			c.alloc.Free(buf)
			// Let the file say what is wrong with this very read.
			return c.File.ReadAt(p, off)
		}
		ch.buf = buf
	}
	n := copy(p, ch.buf[off-ch.off:])
	ch.served += int64(n)
	if ch.served >= ch.length {
		c.alloc.Free(ch.buf)
		ch.buf, ch.done = nil, true
	}
	return n, nil
}

// release frees the buffers of chunks not read to the end (the split
// ended inside a row group, or reading failed).
func (c *chunkCache) release() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, ch := range c.chunks {
		ch.mu.Lock()
		if ch.buf != nil {
			c.alloc.Free(ch.buf)
			ch.buf = nil
		}
		ch.done = true
		ch.mu.Unlock()
	}
}

var _ io.ReaderAt = (*chunkCache)(nil)
