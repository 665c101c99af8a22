package server

import (
	"math/rand/v2"
	"testing"
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
