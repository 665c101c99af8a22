package server

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spindle-ml/spindle/ps"
)

func TestRowIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  func(i int) uint64
	}{
		{"dense", func(i int) uint64 { return uint64(i) }},
		{"high bits", func(i int) uint64 { return uint64(i) << 40 }},
		{"stride", func(i int) uint64 { return uint64(i) * 4096 }},
		{"random", func(i int) uint64 { return rand.New(rand.NewPCG(uint64(i), 1)).Uint64() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var x rowIndex
			want := map[uint64]int32{}
			if _, ok := x.get(tc.key(0)); ok {
				t.Fatal("empty index found a key")
			}
			for i := range 5000 {
				k := tc.key(i)
				if _, ok := want[k]; ok {
					continue
				}
				x.put(k, int32(i))
				want[k] = int32(i)
				if x.len() != len(want) {
					t.Fatalf("len %d after %d puts", x.len(), len(want))
				}
			}
			for k, r := range want {
				if got, ok := x.get(k); !ok || got != r {
					t.Fatalf("get(%d) = %d, %v; want %d", k, got, ok, r)
				}
			}
			if _, ok := x.get(tc.key(5000)); ok {
				t.Fatal("found a key never put")
			}
			seen := 0
			x.all(func(k uint64, r int32) {
				if want[k] != r {
					t.Fatalf("all: %d at row %d, want %d", k, r, want[k])
				}
				seen++
			})
			if seen != len(want) {
				t.Fatalf("all visited %d keys, want %d", seen, len(want))
			}
		})
	}
}

// Keys in ps.SlotHash order, as the client sorts a large request, fall in
// a table's shards one after another and in each shard's index in
// ascending home slots: the order the table's passes stream in.
func TestSlotHashOrderIsAddressOrder(t *testing.T) {
	keys := make([]uint64, 20000)
	for i := range keys {
		keys[i] = uint64(i)*7919 + 3
	}
	slices.SortFunc(keys, func(a, b uint64) int { return cmp.Compare(ps.SlotHash(a), ps.SlotHash(b)) })
	var x rowIndex
	for i := range 5000 {
		x.put(uint64(i), int32(i))
	}
	for j := 1; j < len(keys); j++ {
		a, b := keys[j-1], keys[j]
		switch sa, sb := shardOf(a), shardOf(b); {
		case sa > sb:
			t.Fatalf("key %d (shard %d) sorts before key %d (shard %d)", a, sa, b, sb)
		case sa == sb && x.home(a) > x.home(b):
			t.Fatalf("keys %d and %d of shard %d: home slots %d then %d", a, b, sa, x.home(a), x.home(b))
		}
	}
}

// A request in ps.SlotHash order is taken as in shard order (its values
// then stream, untouched beforehand); one in another order is not.
func TestGroupByShardSeesOrder(t *testing.T) {
	keys := make([]uint64, 5000)
	for i := range keys {
		keys[i] = uint64(i)*7919 + 3
	}
	if groupByShard(keys).inOrder {
		t.Fatal("keys in the order of their ids taken as in shard order")
	}
	slices.SortFunc(keys, func(a, b uint64) int { return cmp.Compare(ps.SlotHash(a), ps.SlotHash(b)) })
	b := groupByShard(keys)
	if !b.inOrder {
		t.Fatal("keys in SlotHash order not taken as in shard order")
	}
	for j, at := range b.order {
		if int(at) != j {
			t.Fatalf("in shard order, key %d grouped at %d", at, j)
		}
		// The table's lookups take each key's hash from the batch.
		if h := ps.SlotHash(keys[j]); b.hashes[j] != h {
			t.Fatalf("key %d's hash kept as %#x, want %#x", keys[j], b.hashes[j], h)
		}
	}
}
