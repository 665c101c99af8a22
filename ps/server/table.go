package server

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
	"google.golang.org/protobuf/proto"
)

// numShards stripes a table's rows over locks, so that concurrent pulls
// and pushes of different keys rarely wait for each other. A key's shard
// is its ps.SlotHash's top bits.
const numShards = 1 << ps.ShardBits

// keyOverhead estimates what a row costs beyond its values: its map entry
// and step count.
const keyOverhead = 48

// table is this server's part of one table.
type table struct {
	spec   *pspb.TableSpec
	dim    int
	stride int       // floats per row: the weights, then the slots
	apply1 optimizer // one row's update
	shards [numShards]shard

	keys, pushes, pulls atomic.Uint64
	// replicated counts the pushes applied as a backup.
	replicated atomic.Uint64
}

// shard holds some of a table's rows, in one slab.
type shard struct {
	mu    sync.Mutex
	index rowIndex  // key → row
	data  []float32 // rows × stride
	steps []int32   // updates per row (Adam's bias correction)
	// rows is a request's rows in this shard, reused.
	rows []int32
	// touched keeps what touchSlots and touchRows read; nothing uses it.
	touched uint64
}

func newTable(spec *pspb.TableSpec) *table {
	spec = proto.Clone(spec).(*pspb.TableSpec)
	dim := int(spec.Dim)
	t := &table{spec: spec, dim: dim, stride: dim * (1 + ps.SlotsPerValue(spec.Optimizer.Kind)), apply1: newOptimizer(spec.Optimizer)}
	return t
}

// rowBytes is what one row costs.
func (t *table) rowBytes() int64 { return int64(t.stride)*4 + keyOverhead }

func shardOf(key uint64) int { return ps.SlotShard(ps.SlotHash(key)) }

// create adds key's row to s and returns its index. s.mu is held.
func (t *table) create(s *shard, key uint64) int32 {
	i := int32(len(s.steps))
	s.index.put(key, i)
	// slices.Grow doubles the slab: no allocation per row. A new slab
	// goes on huge pages where the kernel gives them (adviseHuge).
	if len(s.data)+t.stride > cap(s.data) {
		s.data = slices.Grow(s.data, t.stride)
		adviseHuge(s.data)
	}
	s.data = s.data[:len(s.data)+t.stride]
	s.steps = append(s.steps, 0)
	r := s.data[int(i)*t.stride : (int(i)+1)*t.stride]
	initRow(t.spec, key, r[:t.dim], r[t.dim:])
	t.keys.Add(1)
	return i
}

// rowAt returns row i of s. s.mu is held.
func (t *table) rowAt(s *shard, i int32) []float32 {
	off := int(i) * t.stride
	return s.data[off : off+t.stride : off+t.stride]
}

// batch is one request's keys grouped by shard, so that each shard is
// locked once per request rather than once per key.
type batch struct {
	order  []int32 // positions in the request's keys, shard by shard
	bounds [numShards + 1]int
	// inOrder says that the request came with its keys in shard order
	// (a client sorts a large one by ps.SlotHash): a shard's keys, and
	// their values, lie together in the request.
	inOrder bool
	// hashes holds each key's ps.SlotHash, by position in the request:
	// its shard and its slot, hashed once.
	hashes []uint64
}

func groupByShard(keys []uint64) *batch {
	b := &batch{order: make([]int32, len(keys)), inOrder: true, hashes: make([]uint64, len(keys))}
	var counts [numShards]int
	prev := 0
	for j, k := range keys {
		h := ps.SlotHash(k)
		b.hashes[j] = h
		sh := ps.SlotShard(h)
		counts[sh]++
		b.inOrder = b.inOrder && sh >= prev
		prev = sh
	}
	for sh := range numShards {
		b.bounds[sh+1] = b.bounds[sh] + counts[sh]
	}
	next := b.bounds
	for j, h := range b.hashes {
		sh := ps.SlotShard(h)
		b.order[next[sh]] = int32(j)
		next[sh]++
	}
	return b
}

// lookupOrCreate returns key's row in s (h its ps.SlotHash), creating it
// (with memory from budget, unless reserved) on first touch. s.mu is held.
func (t *table) lookupOrCreate(s *shard, key, h uint64, budget *budget, reserved bool) (int32, error) {
	if i, ok := s.index.getHashed(key, h); ok {
		return i, nil
	}
	if !reserved {
		if err := budget.take(t.rowBytes()); err != nil {
			return 0, err
		}
	}
	return t.create(s, key), nil
}

// ensure creates the rows of keys that do not exist yet, taking their
// memory from budget; it fails, creating nothing more, when the budget is
// spent.
func (t *table) ensure(keys []uint64, budget *budget) error {
	_, err := t.locate(keys, groupByShard(keys), budget)
	return err
}

// rowsByShard calls fn for each key's row (created on first touch), shard
// by shard; it stops at the first error. side, when set, is the request's
// values that fn reads or writes, dim per key (see inRows).
func (t *table) rowsByShard(keys []uint64, b *batch, budget *budget, side []float32, fn func(s *shard, j, row int32)) error {
	return t.visit(keys, b, pass{side: side, fn: fn, locate: func(s *shard, j int32) (int32, error) {
		return t.lookupOrCreate(s, keys[j], b.hashes[j], budget, false)
	}})
}

// pass is what a request does with its keys' rows (see visit).
type pass struct {
	// side is the request's own values for its keys, dim per key, that
	// fn reads or writes (a pull's output, a push's gradients), if any.
	side []float32
	// steps says that fn updates the rows' step counts.
	steps bool
	// locate finds the row of the key at position j of the request.
	locate func(s *shard, j int32) (int32, error)
	fn     func(s *shard, j, row int32)
}

// wholeRequestKeys is the largest request whose passes (see inRows) run
// over all its keys at once rather than shard by shard. A small request
// has few keys in each shard (4 of the 256 a server gets of a push of
// 1024 keys through 4 servers), too few loads in a shard's pass to hide
// one miss behind another: every pass then waits out a whole miss, shard
// after shard. Over the whole request its misses overlap (a pull and a
// push of 256 keys took 20% less CPU). A large request's shards have
// loads enough, and a pass over all its keys would evict what the next
// pass needs (4096 keys took 10% more).
const wholeRequestKeys = 1024

// visit finds the row of every key, grouped by shard as b, with p.locate
// and calls p.fn for each, with each shard's lock held; it stops at the
// first error. A small request locks all its shards (in order, so that
// two requests cannot wait for each other) and runs its passes over all
// of them; a large one goes shard by shard (inRows).
func (t *table) visit(keys []uint64, b *batch, p pass) error {
	if len(keys) <= wholeRequestKeys {
		return t.visitWhole(keys, b, p)
	}
	for sh := range numShards {
		part := b.order[b.bounds[sh]:b.bounds[sh+1]]
		if len(part) == 0 {
			continue
		}
		s := &t.shards[sh]
		s.mu.Lock()
		err := t.inRows(s, b, part, p)
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// visitWhole is visit of a small request: its shards locked together and
// its passes over all their keys.
func (t *table) visitWhole(keys []uint64, b *batch, p pass) error {
	var held [numShards]uint8
	n := 0
	for sh := range numShards {
		if b.bounds[sh] < b.bounds[sh+1] {
			t.shards[sh].mu.Lock()
			held[n] = uint8(sh)
			n++
		}
	}
	defer func() {
		for _, sh := range held[:n] {
			t.shards[sh].mu.Unlock()
		}
	}()
	part := func(sh uint8) []int32 { return b.order[b.bounds[sh]:b.bounds[sh+1]] }
	for _, sh := range held[:n] {
		s := &t.shards[sh]
		s.touched += s.index.touchSlots(b.hashes, part(sh))
	}
	for _, sh := range held[:n] {
		if err := t.findRows(&t.shards[sh], part(sh), p.locate); err != nil {
			return err
		}
	}
	for _, sh := range held[:n] {
		s := &t.shards[sh]
		s.touched += t.touchRows(s, s.rows, p.steps)
	}
	for _, sh := range held[:n] {
		s := &t.shards[sh]
		for k, j := range part(sh) {
			p.fn(s, j, s.rows[k])
		}
	}
	return nil
}

// inRows finds the rows of keys[j] for j in part with p.locate, then
// calls p.fn for each, in passes: the keys' index slots touched, the rows
// found, the rows touched, then p.fn. In a table larger than the caches
// every lookup and every row is a miss; in passes of independent loads
// they overlap, where one key at a time would wait for each in turn. For
// a request not in shard order (b.inOrder), the request's own
// values for the keys (p.side) are touched with the rows: a shard's keys
// then sit far apart in the request, so in a large request each key's
// values are a miss of their own, which p.fn would otherwise wait for.
// In shard order they lie together and stream, and a pass over them only
// costs (a pull and a push of 65536 keys of dim 64 took 8% more CPU).
// s.mu is held.
func (t *table) inRows(s *shard, b *batch, part []int32, p pass) error {
	s.touched += s.index.touchSlots(b.hashes, part)
	if err := t.findRows(s, part, p.locate); err != nil {
		return err
	}
	s.touched += t.touchRows(s, s.rows, p.steps)
	if !b.inOrder && len(p.side) >= sideTouchValues {
		s.touched += t.touchSide(part, p.side)
	}
	for n, j := range part {
		p.fn(s, j, s.rows[n])
	}
	return nil
}

// findRows sets s.rows to the rows of the keys at positions part, found
// with locate. s.mu is held.
func (t *table) findRows(s *shard, part []int32, locate func(s *shard, j int32) (int32, error)) error {
	rows := slices.Grow(s.rows[:0], len(part))[:len(part)]
	s.rows = rows
	for n, j := range part {
		i, err := locate(s, j)
		if err != nil {
			return err
		}
		rows[n] = i
	}
	return nil
}

// touchRows reads the first and last value of each row, and its step
// count when steps is set (a push's), and returns a value that depends on
// them (see touchSlots): the counts are a slab of their own, a miss of
// their own.
func (t *table) touchRows(s *shard, rows []int32, steps bool) uint64 {
	var sum uint64
	for _, i := range rows {
		off := int(i) * t.stride
		sum += uint64(math.Float32bits(s.data[off])) + uint64(math.Float32bits(s.data[off+t.stride-1]))
		if steps {
			sum += uint64(s.steps[i])
		}
	}
	return sum
}

// sideTouchValues is the size from which a request's values are touched
// with the rows (inRows): 1 MiB, a core's second-level cache here. Smaller
// ones stay in the nearer caches, and a pass over them only cost (a pull
// and a push of 1024 keys of dim 64, 256 KiB, took 10-20% more CPU).
const sideTouchValues = 256 << 10

// touchSide reads the first and last of each key's values in side (dim
// per key), as touchRows does with the rows.
func (t *table) touchSide(part []int32, side []float32) uint64 {
	var sum uint64
	for _, j := range part {
		off := int(j) * t.dim
		sum += uint64(math.Float32bits(side[off])) + uint64(math.Float32bits(side[off+t.dim-1]))
	}
	return sum
}

// locate returns the row of each key, creating the missing ones.
func (t *table) locate(keys []uint64, b *batch, budget *budget) ([]int32, error) {
	rows := make([]int32, len(keys))
	err := t.rowsByShard(keys, b, budget, nil, func(_ *shard, j, i int32) { rows[j] = i })
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// pull copies the weights of keys into out (dim per key), creating rows on
// first touch.
func (t *table) pull(keys []uint64, out []float32, budget *budget) error {
	err := t.rowsByShard(keys, groupByShard(keys), budget, out, func(s *shard, j, i int32) {
		copy(out[int(j)*t.dim:(int(j)+1)*t.dim], t.rowAt(s, i)[:t.dim])
	})
	if err != nil {
		return err
	}
	t.pulls.Add(1)
	return nil
}

// push applies grads (dim per key) with the table's optimizer, all or
// nothing: when the memory for every row the push might create cannot be
// reserved up front, the rows are created first, so that a push failing
// for memory changes no weight.
func (t *table) push(keys []uint64, grads []float32, budget *budget) error {
	return t.pushAs(keys, grads, budget, true)
}

// pushAs is push, counted as a primary's or a backup's.
func (t *table) pushAs(keys []uint64, grads []float32, budget *budget, primary bool) error {
	count := &t.pushes
	if !primary {
		count = &t.replicated
	}
	b := groupByShard(keys)
	worst := int64(len(keys)) * t.rowBytes()
	if budget.take(worst) != nil {
		rows, err := t.locate(keys, b, budget)
		if err != nil {
			return err
		}
		t.apply(keys, grads, b, func(_ *shard, j int32) int32 { return rows[j] })
		count.Add(1)
		return nil
	}
	created := 0
	t.apply(keys, grads, b, func(s *shard, j int32) int32 {
		if i, ok := s.index.getHashed(keys[j], b.hashes[j]); ok {
			return i
		}
		created++
		return t.create(s, keys[j])
	})
	budget.give(worst - int64(created)*t.rowBytes())
	count.Add(1)
	return nil
}

// apply runs the optimizer over keys (see visit); row finds a key's row
// with its shard locked.
func (t *table) apply(keys []uint64, grads []float32, b *batch, row func(s *shard, j int32) int32) {
	t.visit(keys, b, pass{side: grads, steps: true,
		locate: func(s *shard, j int32) (int32, error) { return row(s, j), nil },
		fn: func(s *shard, j, i int32) {
			r := t.rowAt(s, i)
			t.apply1(r[:t.dim], r[t.dim:], grads[int(j)*t.dim:(int(j)+1)*t.dim], s.steps[i])
			s.steps[i]++
		}})
}

// owns says whether server index owns key on ring.
func (t *table) owns(ring *ps.Ring, index int, key uint64) bool {
	return ring.OwnerOf(key, t.spec.Rows) == index
}

// owned counts the rows server index owns on ring.
func (t *table) owned(ring *ps.Ring, index int) uint64 {
	n := uint64(0)
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		s.index.all(func(k uint64, _ int32) {
			if t.owns(ring, index, k) {
				n++
			}
		})
		s.mu.Unlock()
	}
	return n
}

// each calls fn with batches of at most n keys that keep accepts and their
// weights, one shard at a time (copied under its lock), until fn fails.
func (t *table) each(n int, keep func(uint64) bool, fn func(keys []uint64, values []float32) error) error {
	for i := range t.shards {
		var keys []uint64
		var values []float32
		s := &t.shards[i]
		s.mu.Lock()
		// Fresh buffers: a sent message may be read after Send returns.
		keys = make([]uint64, 0, s.index.len())
		values = make([]float32, 0, s.index.len()*t.dim)
		s.index.all(func(k uint64, row int32) {
			if !keep(k) {
				return
			}
			off := int(row) * t.stride
			keys = append(keys, k)
			values = append(values, s.data[off:off+t.dim]...)
		})
		s.mu.Unlock()
		for len(keys) > 0 {
			m := min(n, len(keys))
			if err := fn(keys[:m], values[:m*t.dim]); err != nil {
				return err
			}
			keys, values = keys[m:], values[m*t.dim:]
		}
	}
	return nil
}

// budget is a server's memory for rows, shared by its tables.
type budget struct {
	limit int64 // 0: none
	used  atomic.Int64
	full  func(need int64) error // the error when the budget is spent
}

func (b *budget) give(n int64) { b.used.Add(-n) }

func (b *budget) take(n int64) error {
	if b.used.Add(n) > b.limit && b.limit > 0 {
		b.used.Add(-n)
		return b.full(n)
	}
	return nil
}
