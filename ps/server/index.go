package server

import "github.com/spindle-ml/spindle/ps"

// rowIndex maps a shard's keys to their rows: open addressing with linear
// probing over one flat array, each slot a key and its row, placed by
// ps.SlotHash. A lookup in a table far larger than the caches costs a miss
// on the slot and a miss on the row; Go's map adds the group's control
// word and, past 1,024 entries, a table directory, and hashes with a
// function call. Flat slots also let a batch touch every key's slot
// before probing any (touchSlots), so that the misses of a request
// overlap instead of following each other.
type rowIndex struct {
	slots []indexSlot // a power of two of them, or none
	n     int
	shift uint8 // 64 - log2(len(slots))
}

// indexSlot is one key and its row, stored plus one: 0 marks a free slot.
type indexSlot struct {
	key  uint64
	row1 int32
}

// indexMinSlots is the size of a shard's first array.
const indexMinSlots = 64

// home is key's first slot: the SlotHash bits below the shard's, so that
// keys in SlotHash order probe the slots in address order.
func (x *rowIndex) home(key uint64) int { return x.homeOf(ps.SlotHash(key)) }

// homeOf is the home slot of the key whose ps.SlotHash is h.
func (x *rowIndex) homeOf(h uint64) int { return int(h << ps.ShardBits >> x.shift) }

// len returns the number of keys.
func (x *rowIndex) len() int { return x.n }

// get returns key's row.
func (x *rowIndex) get(key uint64) (int32, bool) { return x.getHashed(key, ps.SlotHash(key)) }

// getHashed is get of a key whose ps.SlotHash, h, is known.
func (x *rowIndex) getHashed(key, h uint64) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	mask := len(x.slots) - 1
	for i := x.homeOf(h); ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.row1 == 0 {
			return 0, false
		}
		if s.key == key {
			return s.row1 - 1, true
		}
	}
}

// put adds key, which is not in x, at row.
func (x *rowIndex) put(key uint64, row int32) {
	// At most half full: probes stay short even for clustered keys.
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	x.insert(key, row+1)
	x.n++
}

func (x *rowIndex) insert(key uint64, row1 int32) {
	mask := len(x.slots) - 1
	i := x.home(key)
	for x.slots[i].row1 != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = indexSlot{key: key, row1: row1}
}

// grow doubles the slots and inserts every key again.
func (x *rowIndex) grow() {
	old := x.slots
	size := max(2*len(old), indexMinSlots)
	x.slots = make([]indexSlot, size)
	adviseHuge(x.slots)
	x.shift = uint8(64 - log2(size))
	for _, s := range old {
		if s.row1 != 0 {
			x.insert(s.key, s.row1)
		}
	}
}

// all calls fn for every key and its row, in no particular order.
func (x *rowIndex) all(fn func(key uint64, row int32)) {
	for _, s := range x.slots {
		if s.row1 != 0 {
			fn(s.key, s.row1-1)
		}
	}
}

// touchSlots reads the home slot of the key at j for every j in part,
// its ps.SlotHash hashes[j], and returns a value that depends on them,
// so that the loads are not optimised away. The loads are independent:
// the processor has many in flight at once, and the probes that follow
// find them in cache.
func (x *rowIndex) touchSlots(hashes []uint64, part []int32) uint64 {
	if x.n == 0 {
		return 0
	}
	var sum uint64
	for _, j := range part {
		sum += x.slots[x.homeOf(hashes[j])].key
	}
	return sum
}

func log2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	return l
}
