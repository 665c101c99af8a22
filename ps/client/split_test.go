package client

import (
	"testing"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// split gives every key to its owner exactly once, with where it sits in
// the call, each part allocated at its size, and a large call's parts in
// ps.SlotHash order; with one server live, the call's keys go whole, as
// they are.
func TestSplit(t *testing.T) {
	// New connects lazily: no server needs to listen for a split.
	cl, err := New(Config{Servers: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, Token: token, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.closeConns()
	keys := keysN(10_000)
	spec := &pspb.TableSpec{}
	ring := cl.ring.Load()
	seen := make([]int, len(keys))
	for s, p := range cl.split(ring, spec, keys) {
		checkSlotOrder(t, p, len(keys), ring.Live())
		if p.origin != s || len(p.pos) != len(p.keys) || cap(p.keys) != len(p.keys) || cap(p.pos) != len(p.pos) {
			t.Fatalf("part %d: origin %d, %d keys (cap %d), %d positions (cap %d)", s, p.origin, len(p.keys), cap(p.keys), len(p.pos), cap(p.pos))
		}
		for j, k := range p.keys {
			if o := ring.Owner(k); o != s {
				t.Fatalf("key %d in server %d's part, owned by %d", k, s, o)
			}
			if at := p.at(j); keys[at] != k {
				t.Fatalf("server %d's key %d says it sits at %d, where %d is", s, k, at, keys[at])
			}
			seen[p.at(j)]++
		}
	}
	for j, n := range seen {
		if n != 1 {
			t.Fatalf("key %d went to %d parts", keys[j], n)
		}
	}
	sole, err := ring.WithDead(2, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	parts := cl.split(sole, spec, keys)
	if p := parts[1]; len(p.keys) != len(keys) || &p.keys[0] != &keys[0] || p.pos != nil || len(parts[0].keys)+len(parts[2].keys) != 0 {
		t.Fatalf("one live server: parts of %d, %d and %d keys; want the call's own keys whole to server 1", len(parts[0].keys), len(parts[1].keys), len(parts[2].keys))
	}
}

// checkSlotOrder fails unless p's keys are in the order of the top bits
// of their ps.SlotHash that split sorts a call of n keys to live servers
// by: at least a server's shard, so that a server's table walks its
// shards and slots in address order.
func checkSlotOrder(t *testing.T, p part, n, live int) {
	t.Helper()
	bits := sortBits(n, live)
	if bits < ps.ShardBits {
		t.Fatalf("a call of %d keys to %d servers sorted by %d bits; want at least the shard's %d", n, live, bits, ps.ShardBits)
	}
	for j := 1; j < len(p.keys); j++ {
		if a, b := ps.SlotHash(p.keys[j-1])>>(64-bits), ps.SlotHash(p.keys[j])>>(64-bits); a > b {
			t.Fatalf("server %d's part: key %d (slot order %d) before key %d (%d)", p.origin, p.keys[j-1], a, p.keys[j], b)
		}
	}
}
