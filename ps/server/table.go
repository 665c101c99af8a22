package server

import (
	"sync"
	"sync/atomic"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
	"google.golang.org/protobuf/proto"
)

// numShards stripes a table's rows over locks, so that concurrent pulls
// and pushes of different keys rarely wait for each other.
const numShards = 64

// keyOverhead estimates what a row costs beyond its values: its map entry
// and step count.
const keyOverhead = 48

// table is this server's part of one table.
type table struct {
	spec   *pspb.TableSpec
	dim    int
	stride int // floats per row: the weights, then the slots
	apply  optimizer
	shards [numShards]shard

	keys, pushes, pulls atomic.Uint64
}

// shard holds some of a table's rows, in one slab.
type shard struct {
	mu    sync.Mutex
	index map[uint64]int32 // key → row
	data  []float32        // rows × stride
	steps []int32          // updates per row (Adam's bias correction)
}

func newTable(spec *pspb.TableSpec) *table {
	spec = proto.Clone(spec).(*pspb.TableSpec)
	dim := int(spec.Dim)
	t := &table{spec: spec, dim: dim, stride: dim * (1 + ps.SlotsPerValue(spec.Optimizer.Kind)), apply: newOptimizer(spec.Optimizer)}
	for i := range t.shards {
		t.shards[i].index = make(map[uint64]int32)
	}
	return t
}

// rowBytes is what one row costs.
func (t *table) rowBytes() int64 { return int64(t.stride)*4 + keyOverhead }

func shardOf(key uint64) int { return int(key*0x9e3779b97f4a7c15>>58) % numShards }

// row returns key's row in s, creating it when create allows. s.mu is held.
func (t *table) row(s *shard, key uint64) ([]float32, int32, bool) {
	i, ok := s.index[key]
	if !ok {
		return nil, 0, false
	}
	off := int(i) * t.stride
	return s.data[off : off+t.stride : off+t.stride], i, true
}

// create adds key's row to s. s.mu is held.
func (t *table) create(s *shard, key uint64) []float32 {
	i := int32(len(s.steps))
	s.index[key] = i
	s.data = append(s.data, make([]float32, t.stride)...)
	s.steps = append(s.steps, 0)
	r := s.data[int(i)*t.stride : (int(i)+1)*t.stride]
	initRow(t.spec, key, r[:t.dim], r[t.dim:])
	t.keys.Add(1)
	return r
}

// ensure creates the rows of keys that do not exist yet, reserving their
// memory from budget first; it fails, creating nothing more, when the
// budget is spent.
func (t *table) ensure(keys []uint64, budget *budget) error {
	for _, k := range keys {
		s := &t.shards[shardOf(k)]
		s.mu.Lock()
		if _, ok := s.index[k]; !ok {
			if err := budget.take(t.rowBytes()); err != nil {
				s.mu.Unlock()
				return err
			}
			t.create(s, k)
		}
		s.mu.Unlock()
	}
	return nil
}

// pull copies the weights of keys into out (dim per key), creating rows on
// first touch.
func (t *table) pull(keys []uint64, out []float32, budget *budget) error {
	if err := t.ensure(keys, budget); err != nil {
		return err
	}
	for j, k := range keys {
		s := &t.shards[shardOf(k)]
		s.mu.Lock()
		r, _, _ := t.row(s, k)
		copy(out[j*t.dim:(j+1)*t.dim], r[:t.dim])
		s.mu.Unlock()
	}
	t.pulls.Add(1)
	return nil
}

// push applies grads (dim per key) with the table's optimizer. The rows
// are created first, so that a push that fails for memory changes no
// weight.
func (t *table) push(keys []uint64, grads []float32, budget *budget) error {
	if err := t.ensure(keys, budget); err != nil {
		return err
	}
	for j, k := range keys {
		s := &t.shards[shardOf(k)]
		s.mu.Lock()
		r, i, _ := t.row(s, k)
		t.apply(r[:t.dim], r[t.dim:], grads[j*t.dim:(j+1)*t.dim], s.steps[i])
		s.steps[i]++
		s.mu.Unlock()
	}
	t.pushes.Add(1)
	return nil
}

// each calls fn with batches of at most n keys and their weights, one
// shard at a time (copied under its lock), until fn fails.
func (t *table) each(n int, fn func(keys []uint64, values []float32) error) error {
	for i := range t.shards {
		var keys []uint64
		var values []float32
		s := &t.shards[i]
		s.mu.Lock()
		// Fresh buffers: a sent message may be read after Send returns.
		keys = make([]uint64, 0, len(s.index))
		values = make([]float32, 0, len(s.index)*t.dim)
		for k, row := range s.index {
			off := int(row) * t.stride
			keys = append(keys, k)
			values = append(values, s.data[off:off+t.dim]...)
		}
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

func (b *budget) take(n int64) error {
	if b.used.Add(n) > b.limit && b.limit > 0 {
		b.used.Add(-n)
		return b.full(n)
	}
	return nil
}
