package client

import (
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// part is the keys of one call that go to one server, where each sits in
// the call's arrays, and the server the keys first went to (a push's
// origin, which its retries keep). A nil pos means the keys are the
// call's own, in its order: the call went to one server whole.
type part struct {
	keys   []uint64
	pos    []int32
	origin int
}

// at is where p's jth key sits in the call's arrays.
func (p part) at(j int) int {
	if p.pos == nil {
		return j
	}
	return int(p.pos[j])
}

// split routes keys over the servers by ring (or in ranges, for a dense
// table). Each part's origin is its server. When one server is live it
// takes the keys whole, unrouted, in place. Otherwise a call of sortFrom
// keys or more has each part in ps.SlotHash order (see sortBits), a
// smaller one in the call's order; a first pass finds every key's bucket
// (its server, then its slot order) and counts, so that the parts are
// allocated once, at their sizes.
func (c *Client) split(ring *ps.Ring, spec *pspb.TableSpec, keys []uint64) []part {
	parts := make([]part, c.Servers())
	for i := range parts {
		parts[i].origin = i
	}
	if s := ring.Sole(); s >= 0 {
		parts[s].keys = keys
		return parts
	}
	bits := sortBits(len(keys), ring.Live())
	buckets := make([]uint32, len(keys))
	// counts[b+1] counts bucket b's keys, then (summed) says where it starts.
	counts := make([]int32, len(parts)<<bits+1)
	for j, k := range keys {
		b := uint32(owner(ring, spec, k)) << bits
		if bits > 0 {
			b |= uint32(ps.SlotHash(k) >> (64 - bits))
		}
		buckets[j] = b
		counts[b+1]++
	}
	for b := 1; b < len(counts); b++ {
		counts[b] += counts[b-1]
	}
	sorted, pos := make([]uint64, len(keys)), make([]int32, len(keys))
	for i := range parts {
		lo, hi := counts[i<<bits], counts[(i+1)<<bits]
		parts[i].keys, parts[i].pos = sorted[lo:hi:hi], pos[lo:hi:hi]
	}
	for j, b := range buckets {
		at := counts[b]
		sorted[at], pos[at] = keys[j], int32(j)
		counts[b]++
	}
	return parts
}

// sortFrom is the smallest call whose parts split sorts in ps.SlotHash
// order. A server's table then visits its shards and their slots in
// address order and the call's values (a pull's rows, a push's
// gradients) in the order they lie, so that its loads stream: at 65536
// keys of dim 8 spread over a table larger than the caches, a pull and a
// push took a quarter less of a server's CPU (BenchmarkTable, keys
// sorted beforehand). The client pays only a scatter of the pulled rows
// and a gather of the gradients in another order, which a call to
// several servers makes anyway; a call to a sole server goes whole,
// without them (sorted, one server's pull and push of 65536 keys of dim
// 64 took 15-30% more CPU in one run). A small call's values stay in the nearer
// caches, where order matters little.
const sortFrom = 4096

// sortBits is how many top bits of ps.SlotHash split sorts a call of n
// keys to live servers by: none below sortFrom; else enough that each
// bucket holds a few keys, bounded so that the counts stay small, and at
// least the bits that pick a server's shard.
func sortBits(n, live int) uint {
	if n < sortFrom {
		return 0
	}
	bits := uint(ps.ShardBits)
	for bits < 14 && n>>(bits+2) >= max(live, 1) {
		bits++
	}
	return bits
}

func owner(ring *ps.Ring, spec *pspb.TableSpec, k uint64) int {
	return ring.OwnerOf(k, spec.Rows)
}

// resplit routes a failed part again by ring, keeping its origin.
func (c *Client) resplit(ring *ps.Ring, spec *pspb.TableSpec, p part) map[int]part {
	out := map[int]part{}
	for j, k := range p.keys {
		s := owner(ring, spec, k)
		q := out[s]
		q.keys, q.pos, q.origin = append(q.keys, k), append(q.pos, int32(p.at(j))), p.origin
		out[s] = q
	}
	return out
}
