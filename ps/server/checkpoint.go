package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/rpc"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// A server's checkpoint file holds every table of its part, in Spindle's
// own little-endian format:
//
//	magic "SPSCKPT1", clock i64, server u32, servers u32, ring version u64, tables u32
//	per table: spec length u32, spec (TableSpec protobuf), stride u32, rows u64,
//	           then per row: key u64, updates i32, stride × f32 (weights, then slots)
//
// It is written under a temporary name and published whole.
const ckptMagic = "SPSCKPT1"

// FileName is the name of server index's part of a checkpoint of servers
// servers.
func FileName(index, servers int) string { return fmt.Sprintf("ps-%d-of-%d.ckpt", index, servers) }

// pendingCkpt is a checkpoint a worker asked for at a clock.
type pendingCkpt struct {
	dir  string
	done chan struct{}
	resp *pspb.CheckpointResponse
	err  error
}

// checkpoints are a server's pending and finished checkpoints.
type checkpoints struct {
	mu       sync.Mutex
	byClock  map[int64]*pendingCkpt
	restored map[string]int64 // dir → the clock restored from it
	wg       sync.WaitGroup
}

// askCheckpoint registers a checkpoint at clock in dir (once) and starts
// taking it once every worker has finished clock steps. It is called
// with the worker's clock advance, in the same step (advanceAndHold).
func (s *Server) askCheckpoint(worker int, clock int64, dir string) {
	s.ckpt.mu.Lock()
	defer s.ckpt.mu.Unlock()
	s.clocks.advanceAndHold(worker, clock)
	if _, ok := s.ckpt.byClock[clock]; ok {
		return
	}
	p := &pendingCkpt{dir: dir, done: make(chan struct{})}
	s.ckpt.byClock[clock] = p
	s.ckpt.wg.Add(1)
	go func() {
		defer s.ckpt.wg.Done()
		defer close(p.done)
		defer s.clocks.release()
		if err := s.clocks.waitAll(s.life, clock, s.cfg.WaitTimeout); err != nil {
			p.err = fmt.Errorf("ps %d: checkpoint at clock %d: %w", s.cfg.Index, clock, err)
			return
		}
		p.resp, p.err = s.writeCheckpoint(s.life, dir, clock)
		if p.err == nil {
			s.log.Info("checkpoint written", "clock", clock, "file", p.resp.File, "keys", p.resp.Keys, "bytes", p.resp.Bytes)
		}
	}()
}

// Checkpoint implements pspb.ParameterServerServer.
func (s *Server) Checkpoint(ctx context.Context, req *pspb.CheckpointRequest) (*pspb.CheckpointResponse, error) {
	s.ckpt.mu.Lock()
	p, ok := s.ckpt.byClock[req.Clock]
	s.ckpt.mu.Unlock()
	if !ok {
		return nil, rpc.Errorf(errNotFound, "ps %d: no checkpoint was asked for at clock %d", s.cfg.Index, req.Clock)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err() // the interceptors give it its code
	}
	if p.err != nil {
		return nil, rpc.Errorf(errInternal, "%s", p.err.Error())
	}
	return p.resp, nil
}

// writeCheckpoint writes this server's part of every table to dir.
func (s *Server) writeCheckpoint(ctx context.Context, dir string, clock int64) (*pspb.CheckpointResponse, error) {
	n := len(s.cfg.Ring.Servers())
	uri := joinURI(dir, FileName(s.cfg.Index, n))
	fs, name, err := s.files().Resolve(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("checkpoint to %s: %w", uri, err)
	}
	if dead := s.ring.Load().DeadServers(); len(dead) > 0 {
		return nil, fmt.Errorf("checkpoint to %s: servers %v are out of the ring; a checkpoint needs every server's part", uri, dead)
	}
	if err := fsys.MkdirPrivate(ctx, fs, path.Dir(name)); err != nil {
		return nil, fmt.Errorf("checkpoint to %s: %w", uri, err)
	}
	s.mu.RLock()
	names := make([]string, 0, len(s.tables))
	for name := range s.tables {
		names = append(names, name)
	}
	tables := make([]*table, 0, len(names))
	slices.Sort(names)
	for _, name := range names {
		tables = append(tables, s.tables[name])
	}
	s.mu.RUnlock()
	keys, size, err := writePart(ctx, fs, name, clock, s.cfg.Index, n, s.ring.Load().Version(), tables)
	if err != nil {
		return nil, fmt.Errorf("checkpoint to %s: %w", uri, err)
	}
	return &pspb.CheckpointResponse{File: uri, Keys: keys, Bytes: uint64(size)}, nil
}

// writePart writes server index's part (of n) of a checkpoint at clock,
// holding tables, to name inside fs, atomically. It returns the rows and
// bytes written.
func writePart(ctx context.Context, fs fsys.FS, name string, clock int64, index, n int, ringVersion uint64, tables []*table) (uint64, int64, error) {
	out, err := fsys.CreatePrivate(ctx, fs, name)
	if err != nil {
		return 0, 0, err
	}
	defer out.Abort()
	counter := &countingWriter{w: out}
	w := bufio.NewWriterSize(counter, 1<<20)
	le := binary.LittleEndian
	var hdr []byte
	hdr = append(hdr, ckptMagic...)
	hdr = le.AppendUint64(hdr, uint64(clock))
	hdr = le.AppendUint32(hdr, uint32(index))
	hdr = le.AppendUint32(hdr, uint32(n))
	hdr = le.AppendUint64(hdr, ringVersion)
	hdr = le.AppendUint32(hdr, uint32(len(tables)))
	w.Write(hdr)
	var keys uint64
	for _, t := range tables {
		spec, err := proto.Marshal(t.spec)
		if err != nil {
			return 0, 0, err
		}
		// The row count first: every shard is copied under its lock, so
		// the count is taken the same way.
		shards := make([]shardCopy, numShards)
		var rows uint64
		for i := range t.shards {
			shards[i] = t.shards[i].snapshot()
			rows += uint64(len(shards[i].keys))
		}
		var b []byte
		b = le.AppendUint32(b, uint32(len(spec)))
		b = append(b, spec...)
		b = le.AppendUint32(b, uint32(t.stride))
		b = le.AppendUint64(b, rows)
		w.Write(b)
		row := make([]byte, 12+4*t.stride)
		for _, sc := range shards {
			for j, k := range sc.keys {
				le.PutUint64(row, k)
				le.PutUint32(row[8:], uint32(sc.steps[j]))
				for v, f := range sc.data[j*t.stride : (j+1)*t.stride] {
					le.PutUint32(row[12+4*v:], math.Float32bits(f))
				}
				w.Write(row)
			}
		}
		keys += rows
	}
	if err := w.Flush(); err != nil {
		return 0, 0, err
	}
	if err := out.Commit(); err != nil {
		return 0, 0, err
	}
	return keys, counter.n, nil
}

// shardCopy is a shard's rows copied under its lock.
type shardCopy struct {
	keys  []uint64
	steps []int32
	data  []float32
}

func (s *shard) snapshot() shardCopy {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := shardCopy{keys: make([]uint64, len(s.steps)), steps: slices.Clone(s.steps), data: slices.Clone(s.data)}
	for k, i := range s.index {
		c.keys[i] = k
	}
	return c
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Restore implements pspb.ParameterServerServer.
func (s *Server) Restore(ctx context.Context, req *pspb.RestoreRequest) (*pspb.RestoreResponse, error) {
	s.ckpt.mu.Lock()
	defer s.ckpt.mu.Unlock()
	if clock, ok := s.ckpt.restored[req.Dir]; ok {
		return &pspb.RestoreResponse{Clock: clock}, nil
	}
	clock, tables, used, err := s.readCheckpoint(ctx, req.Dir)
	if err != nil {
		return nil, rpc.Errorf(errWrongState, "%s", err.Error())
	}
	var keys uint64
	for _, t := range tables {
		keys += t.keys.Load()
	}
	s.mu.Lock()
	s.tables = tables
	s.budget.used.Store(used)
	s.mu.Unlock()
	s.clocks.reset(clock)
	s.ckpt.restored[req.Dir] = clock
	s.log.Info("restored from checkpoint", "dir", req.Dir, "clock", clock, "tables", len(tables), "keys", keys)
	return &pspb.RestoreResponse{Clock: clock, Keys: keys}, nil
}

// readCheckpoint reads this server's part of the checkpoint in dir.
func (s *Server) readCheckpoint(ctx context.Context, dir string) (int64, map[string]*table, int64, error) {
	clock, tables, used, err := readPart(ctx, s.files(), dir, s.cfg.Index, len(s.cfg.Ring.Servers()))
	if err != nil {
		return 0, nil, 0, fmt.Errorf("ps %d: restore: %w", s.cfg.Index, err)
	}
	if s.cfg.MemoryBytes > 0 && used > s.cfg.MemoryBytes {
		return 0, nil, 0, fmt.Errorf("ps %d: restore from %s: its rows need %d MiB, over this server's %d MiB (spindle.ps.memory)",
			s.cfg.Index, joinURI(dir, FileName(s.cfg.Index, len(s.cfg.Ring.Servers()))), used>>20, s.cfg.MemoryBytes>>20)
	}
	return clock, tables, used, nil
}

// readPart reads server index's part (of n) of the checkpoint in dir: its
// clock, its tables and the bytes their rows take.
func readPart(ctx context.Context, files *fsys.Resolver, dir string, index, n int) (int64, map[string]*table, int64, error) {
	uri := joinURI(dir, FileName(index, n))
	fail := func(format string, args ...any) (int64, map[string]*table, int64, error) {
		return 0, nil, 0, fmt.Errorf("read %s: %s", uri, fmt.Sprintf(format, args...))
	}
	fs, name, err := files.Resolve(ctx, uri)
	if err != nil {
		return fail("%v", err)
	}
	f, err := fs.Open(ctx, name)
	if err != nil {
		return fail("%v (was the checkpoint taken with %d servers?)", err, n)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	le := binary.LittleEndian
	hdr := make([]byte, len(ckptMagic)+8+4+4+8+4)
	if _, err := io.ReadFull(r, hdr); err != nil || string(hdr[:len(ckptMagic)]) != ckptMagic {
		return fail("not a parameter-server checkpoint")
	}
	h := hdr[len(ckptMagic):]
	clock := int64(le.Uint64(h))
	if idx, servers := le.Uint32(h[8:]), le.Uint32(h[12:]); int(idx) != index || int(servers) != n {
		return fail("written by server %d of %d, read as server %d of %d", idx, servers, index, n)
	}
	tables := map[string]*table{}
	var used int64
	for range le.Uint32(h[24:]) {
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return fail("truncated: %v", err)
		}
		spec := make([]byte, le.Uint32(b[:]))
		if _, err := io.ReadFull(r, spec); err != nil {
			return fail("truncated: %v", err)
		}
		ts := &pspb.TableSpec{}
		if err := proto.Unmarshal(spec, ts); err != nil {
			return fail("table spec: %v", err)
		}
		t := newTable(ts)
		var sr [12]byte
		if _, err := io.ReadFull(r, sr[:]); err != nil {
			return fail("table %s: truncated: %v", ts.Name, err)
		}
		if stride := int(le.Uint32(sr[:])); stride != t.stride {
			return fail("table %s: rows of %d values, its spec makes %d", ts.Name, stride, t.stride)
		}
		rows := le.Uint64(sr[4:])
		row := make([]byte, 12+4*t.stride)
		for range rows {
			if _, err := io.ReadFull(r, row); err != nil {
				return fail("table %s: truncated: %v", ts.Name, err)
			}
			k := le.Uint64(row)
			sh := &t.shards[shardOf(k)]
			i := t.create(sh, k)
			sh.steps[i] = int32(le.Uint32(row[8:]))
			dst := t.rowAt(sh, i)
			for v := range dst {
				dst[v] = math.Float32frombits(le.Uint32(row[12+4*v:]))
			}
		}
		used += int64(rows) * t.rowBytes()
		tables[ts.Name] = t
	}
	return clock, tables, used, nil
}

// CheckpointRows calls fn with the rows of the named table in the
// checkpoint in dir (one of servers parts each), every key once: from the
// part of the server that owned it, since the others' are its backups'
// copies. It reads one part at a time, so it needs the memory of the
// largest part, not of the whole table. fn gets the table's spec and
// batches of keys with their weights (dim values each, no optimizer
// slots); table "" gives every table. It returns the checkpoint's clock.
func CheckpointRows(ctx context.Context, files *fsys.Resolver, dir string, servers int, table string,
	fn func(spec *pspb.TableSpec, keys []uint64, weights []float32) error) (int64, error) {
	addrs := make([]string, servers)
	for i := range addrs {
		addrs[i] = fmt.Sprint(i) // placement depends on the index alone
	}
	ring, err := ps.NewRing(1, addrs, 0)
	if err != nil {
		return 0, err
	}
	var clock int64
	found := table == ""
	for i := range servers {
		c, tables, _, err := readPart(ctx, files, dir, i, servers)
		if err != nil {
			return 0, err
		}
		clock = c
		names := make([]string, 0, len(tables))
		for name := range tables {
			if table == "" || name == table {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			found = true
			t := tables[name]
			own := func(k uint64) bool { return ring.OwnerOf(k, t.spec.Rows) == i }
			if err := t.each(1<<14, own, func(keys []uint64, values []float32) error { return fn(t.spec, keys, values) }); err != nil {
				return 0, err
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("%w: checkpoint %s has no table %q", ErrNoTable, dir, table)
	}
	return clock, nil
}

// ErrNoTable is returned for a table a checkpoint does not hold.
var ErrNoTable = errors.New("ps: no such table")

// joinURI joins a directory URI (a path or hdfs://...) and a file name.
func joinURI(dir, name string) string {
	if dir == "" {
		return name
	}
	if dir[len(dir)-1] == '/' {
		return dir + name
	}
	return dir + "/" + name
}

// files is the server's file-system resolver.
func (s *Server) files() *fsys.Resolver {
	if s.cfg.Files != nil {
		return s.cfg.Files
	}
	return defaultFiles
}

// defaultFiles resolves with the environment's Hadoop settings.
var defaultFiles = fsys.NewResolver(fsys.Options{})
