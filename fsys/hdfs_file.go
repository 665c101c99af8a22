package fsys

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"google.golang.org/protobuf/proto"
)

const (
	// hdfsMaxCursors bounds the block streams one file keeps open for
	// concurrent ReadAt calls.
	hdfsMaxCursors = 4
	// hdfsTailSize is fetched whole on the first read near the end of a
	// file, where Parquet and Arrow IPC keep their footers, so the few
	// small footer reads cost one datanode round trip.
	hdfsTailSize = 64 << 10
	// hdfsSkipLimit is the longest forward hop read through on an open
	// stream rather than reconnecting at the new offset.
	hdfsSkipLimit = 64 << 10
)

// hdfsFile reads an HDFS file. ReadAt is safe for concurrent use: each
// call takes a cursor (an open block stream); a read starting where a
// cursor stopped continues its stream instead of opening a new one, so
// sequential column chunks cost no extra round trips.
type hdfsFile struct {
	h    *hdfsFS
	c    *pooledClient // the client it opened on, given back at Close
	name string
	size int64

	mu     sync.Mutex
	cond   *sync.Cond
	idle   []*hdfsCursor
	open   int // cursors in existence, idle or busy
	closed bool
	tail   []byte // the last hdfsTailSize bytes of the file, once fetched

	pos int64 // for Read and Seek
}

// hdfsCursor is one open reader and where its stream stands.
type hdfsCursor struct {
	r   *hdfs.FileReader
	off int64
}

var _ File = (*hdfsFile)(nil)

func newHDFSFile(h *hdfsFS, c *pooledClient, name string, r *hdfs.FileReader) *hdfsFile {
	f := &hdfsFile{h: h, c: c, name: name, size: r.Stat().Size(), idle: []*hdfsCursor{{r: r}}, open: 1}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *hdfsFile) Size() int64 { return f.size }

func (f *hdfsFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.h.uri(f.name), Err: fmt.Errorf("negative offset %d", off)}
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := len(p)
	if rem := f.size - off; int64(want) > rem {
		want = int(rem)
	}
	if n, ok, err := f.readTail(p[:want], off); ok || err != nil {
		if err == nil && n < len(p) {
			err = io.EOF
		}
		return n, err
	}
	c, err := f.take(off)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := f.readCursor(c, p[:want], off)
	f.give(c, err == nil)
	if err != nil {
		return n, f.readError(off+int64(n), start, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readTail serves reads within the last hdfsTailSize bytes of the file
// from a copy of them fetched once.
func (f *hdfsFile) readTail(p []byte, off int64) (int, bool, error) {
	tailOff := max(0, f.size-hdfsTailSize)
	if off < tailOff {
		return 0, false, nil
	}
	f.mu.Lock()
	tail := f.tail
	f.mu.Unlock()
	if tail == nil {
		tail = make([]byte, f.size-tailOff)
		c, err := f.take(tailOff)
		if err != nil {
			return 0, false, err
		}
		start := time.Now()
		n, err := f.readCursor(c, tail, tailOff)
		f.give(c, err == nil)
		if err != nil {
			return 0, false, f.readError(tailOff+int64(n), start, err)
		}
		f.mu.Lock()
		f.tail = tail
		f.mu.Unlock()
	}
	return copy(p, tail[off-tailOff:]), true, nil
}

// readCursor fills p from off with c's stream, seeking it first when it
// stands elsewhere.
func (f *hdfsFile) readCursor(c *hdfsCursor, p []byte, off int64) (int, error) {
	if err := c.r.SetDeadline(time.Now().Add(f.h.cluster.ioTimeout)); err != nil {
		return 0, err
	}
	switch d := off - c.off; {
	case d == 0:
		// Continue the stream. (The client would drop it on any Seek,
		// even to where it stands.)
	case d > 0 && d <= hdfsSkipLimit:
		// A short hop forward reads through rather than reconnecting. It
		// reads instead of seeking because the client's in-stream skip
		// leaves its block offset behind, and a later failover or block
		// end then resumes at the wrong offset.
		if _, err := io.CopyN(io.Discard, c.r, d); err != nil {
			return 0, err
		}
		c.off = off
	default:
		if _, err := c.r.Seek(off, io.SeekStart); err != nil {
			return 0, err
		}
		c.off = off
	}
	n, err := io.ReadFull(c.r, p)
	c.off += int64(n)
	return n, err
}

// take returns a cursor for a read at off: an idle one standing at off,
// else any idle one, else a new one, else it waits.
func (f *hdfsFile) take(off int64) (*hdfsCursor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if f.closed {
			return nil, &fs.PathError{Op: "read", Path: f.h.uri(f.name), Err: os.ErrClosed}
		}
		best := -1
		for i, c := range f.idle {
			if c.off == off {
				best = i
				break
			}
			best = i
		}
		if best >= 0 {
			c := f.idle[best]
			f.idle = append(f.idle[:best], f.idle[best+1:]...)
			return c, nil
		}
		if f.open < hdfsMaxCursors {
			f.open++
			f.mu.Unlock()
			r, err := f.c.c.Open(f.name)
			f.mu.Lock()
			if err != nil {
				f.open--
				f.cond.Signal()
				return nil, f.h.pathError("open", f.name, err)
			}
			return &hdfsCursor{r: r}, nil
		}
		f.cond.Wait()
	}
}

// give returns a cursor; a failed one is closed, since its stream may be
// broken.
func (f *hdfsFile) give(c *hdfsCursor, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !ok || f.closed {
		c.r.Close()
		f.open--
	} else {
		f.idle = append(f.idle, c)
	}
	f.cond.Signal()
}

func (f *hdfsFile) Read(p []byte) (int, error) {
	if f.pos >= f.size {
		return 0, io.EOF
	}
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *hdfsFile) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = f.pos + offset
	case io.SeekEnd:
		abs = f.size + offset
	default:
		return f.pos, &fs.PathError{Op: "seek", Path: f.h.uri(f.name), Err: fmt.Errorf("bad whence %d", whence)}
	}
	if abs < 0 {
		return f.pos, &fs.PathError{Op: "seek", Path: f.h.uri(f.name), Err: syscall.EINVAL}
	}
	f.pos = abs
	return abs, nil
}

func (f *hdfsFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	for _, c := range f.idle {
		c.r.Close()
		f.open--
	}
	f.idle = nil
	f.cond.Broadcast()
	f.h.release(f.c)
	return nil
}

const clientProtocol = "org.apache.hadoop.hdfs.protocol.ClientProtocol"

// blockRange is one block of a file and the hosts holding it.
type blockRange struct {
	offset, length int64
	hosts          []string
	// id is the block's id; datanodes the replicas' transfer addresses.
	id        uint64
	datanodes []string
}

func (h *hdfsFS) blockLocations(ctx context.Context, name string, off, length int64) ([]blockRange, error) {
	nn, err := h.nnClient()
	if err != nil {
		return nil, h.pathError("locations", name, err)
	}
	req := &hadooppb.GetBlockLocationsRequestProto{
		Src: proto.String(name), Offset: proto.Uint64(uint64(off)), Length: proto.Uint64(uint64(length)),
	}
	resp := &hadooppb.GetBlockLocationsResponseProto{}
	if err := nn.Call(ctx, "getBlockLocations", req, resp); err != nil {
		var re *hadooprpc.RemoteError
		if errors.As(err, &re) {
			if mapped, ok := hdfsExceptions[re.Class]; ok {
				err = fmt.Errorf("%w (%s)", mapped, re.Message)
			}
		}
		return nil, h.pathError("locations", name, err)
	}
	var out []blockRange
	for _, b := range resp.GetLocations().GetBlocks() {
		br := blockRange{offset: int64(b.GetOffset()), length: int64(b.GetB().GetNumBytes()), id: b.GetB().GetBlockId()}
		for _, loc := range b.GetLocs() {
			br.datanodes = append(br.datanodes, net.JoinHostPort(loc.GetId().GetIpAddr(), strconv.Itoa(int(loc.GetId().GetXferPort()))))
			host := loc.GetId().GetHostName()
			if host == "" {
				host = loc.GetId().GetIpAddr()
			}
			br.hosts = append(br.hosts, host)
		}
		out = append(out, br)
	}
	return out, nil
}
