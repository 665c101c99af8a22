package server

import (
	"slices"
	"testing"
)

// A retried push's sub-part for a backup is split so that the keys an
// earlier attempt sent that backup go again alone, in the same order (the
// same keys hash, so the backup's duplicate check finds them), and only
// the keys new to it go in a sub-part of their own.
func TestCarveResendsEarlierSubParts(t *testing.T) {
	p := &subPart{backup: 2, keys: []uint64{5, 9, 1, 7, 3}, grads: []float32{50, 51, 90, 91, 10, 11, 70, 71, 30, 31}}
	for _, tc := range []struct {
		name             string
		old              []uint64
		ok               bool
		inKeys, outKeys  []uint64
		inGrads, outGrad []float32
	}{
		{"a subset, in the part's order", []uint64{9, 7}, true, []uint64{9, 7}, []uint64{5, 1, 3}, []float32{90, 91, 70, 71}, []float32{50, 51, 10, 11, 30, 31}},
		{"all of it", []uint64{5, 9, 1, 7, 3}, true, []uint64{5, 9, 1, 7, 3}, nil, p.grads, nil},
		{"a key it no longer holds", []uint64{9, 4}, false, nil, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out, ok := p.carve(tc.old, 2)
			if ok != tc.ok {
				t.Fatalf("carve %v: ok %v, want %v", tc.old, ok, tc.ok)
			}
			if !ok {
				if out != p {
					t.Fatal("a failed carve changed the sub-part")
				}
				return
			}
			if !slices.Equal(in.keys, tc.inKeys) || !slices.Equal(out.keys, tc.outKeys) ||
				!slices.Equal(in.grads, tc.inGrads) || !slices.Equal(out.grads, tc.outGrad) || in.backup != 2 || out.backup != 2 {
				t.Fatalf("carve %v: in %v %v, out %v %v", tc.old, in.keys, in.grads, out.keys, out.grads)
			}
		})
	}
}

// What a failed replication sent is remembered per push until its retry
// takes it, and the oldest pushes are forgotten past the window.
func TestSentPartsWindow(t *testing.T) {
	p := newSentParts()
	id := pushID{worker: 1, seq: 7, origin: 2, keys: 42}
	p.add(id, 0, []uint64{1, 2})
	p.add(id, 0, []uint64{3})
	p.add(id, 1, []uint64{4})
	got := p.take(id)
	if len(got[0]) != 2 || len(got[1]) != 1 || !slices.Equal(got[0][1], []uint64{3}) {
		t.Fatalf("took %v", got)
	}
	if p.take(id) != nil {
		t.Fatal("a push's sent parts were taken twice")
	}
	for i := range sentWindow + 1 {
		p.add(pushID{seq: uint64(i)}, 0, []uint64{1})
	}
	if p.take(pushID{seq: 0}) != nil || p.take(pushID{seq: sentWindow}) == nil {
		t.Fatal("the window keeps the oldest push or forgets the newest")
	}
}
