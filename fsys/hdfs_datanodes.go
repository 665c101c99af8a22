package fsys

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// dnFailures remembers each datanode's latest failure (a refused or
// failed connection, a broken stream), so that a read that no replica
// could serve names the datanodes it tried: colinmarc/hdfs fails over
// between replicas itself and reports only the last error.
type dnFailures struct {
	mu   sync.Mutex
	last map[string]dnFailure // by transfer address
}

type dnFailure struct {
	at  time.Time
	err error
}

// wrap returns dial, recording the failures of the connections it makes.
func (d *dnFailures) wrap(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			d.record(addr, err)
			return nil, err
		}
		return &dnConn{Conn: c, addr: addr, d: d}, nil
	}
}

func (d *dnFailures) record(addr string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last = map[string]dnFailure{}
	}
	d.last[addr] = dnFailure{at: time.Now(), err: err}
}

// since describes the failures of the given datanodes and of any other
// datanode that failed at or after t, one "addr (error)" each.
func (d *dnFailures) since(t time.Time, datanodes []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, a := range datanodes {
		seen[a] = true
		if f, ok := d.last[a]; ok && !f.at.Before(t) {
			out = append(out, fmt.Sprintf("%s (%v)", a, f.err))
		} else {
			out = append(out, a)
		}
	}
	var others []string
	for a, f := range d.last {
		if !seen[a] && !f.at.Before(t) {
			others = append(others, fmt.Sprintf("%s (%v)", a, f.err))
		}
	}
	slices.Sort(others)
	return append(out, others...)
}

// dnConn is a datanode connection whose failures are recorded.
type dnConn struct {
	net.Conn
	addr string
	d    *dnFailures
}

func (c *dnConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		c.d.record(c.addr, err)
	}
	return n, err
}

func (c *dnConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.d.record(c.addr, err)
	}
	return n, err
}

// readError describes a read of f that failed at off: the block there and
// the datanodes tried since start, as the namenode lists them now and as
// they failed.
func (f *hdfsFile) readError(off int64, start time.Time, err error) error {
	err = interpretHDFS(err)
	ctx, cancel := context.WithTimeout(context.Background(), f.h.cluster.dialTimeout)
	defer cancel()
	blocks, lerr := f.h.blockLocations(ctx, f.name, off, 1)
	var b *blockRange
	if lerr == nil && len(blocks) > 0 {
		b = &blocks[0]
	}
	tried := f.h.cluster.dnFails.since(start, nil)
	if b != nil {
		tried = f.h.cluster.dnFails.since(start, b.datanodes)
	}
	if b == nil && len(tried) == 0 {
		return &fs.PathError{Op: "read", Path: f.h.uri(f.name), Err: fmt.Errorf("at offset %d: %w", off, err)}
	}
	what := "the block there"
	if b != nil {
		what = fmt.Sprintf("block blk_%d (bytes %d to %d of the file)", b.id, b.offset, b.offset+b.length)
	}
	var where string
	switch {
	case len(tried) > 0:
		where = "datanodes tried: " + strings.Join(tried, ", ")
	default:
		where = "the namenode lists no live replica"
	}
	return &fs.PathError{Op: "read", Path: f.h.uri(f.name),
		Err: fmt.Errorf("at offset %d: no replica of %s could be read (%s): %w", off, what, where, err)}
}
