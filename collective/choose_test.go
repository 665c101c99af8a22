package collective

import (
	"fmt"
	"testing"
)

// TestChooseAllReduce checks the default choice against the cost model
// for a job of 1,000 ranks on 125 hosts of 8: the tree for small vectors,
// the hierarchy from where it beats the tree (1 MiB) until its bytes
// inside hosts cost more than the steps it saves (about 100 MiB), the
// ring above. Never an algorithm the model says is slower than another
// it could run.
func TestChooseAllReduce(t *testing.T) {
	const n, hosts, per = 1000, 125, 8
	small := DefaultSmallBytes(n)
	for _, tc := range []struct {
		size int
		want algorithm
	}{
		{8, algoTree},
		{64 << 10, algoTree},
		{1 << 20, algoHier},
		{16 << 20, algoHier},
		{64 << 20, algoHier},
		{256 << 20, algoRing},
	} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			got := chooseAllReduce(n, tc.size, tc.size <= small, true, hosts, per)
			if got != tc.want {
				t.Fatalf("%d bytes on %d hosts of %d: algorithm %d, want %d", tc.size, hosts, per, got, tc.want)
			}
		})
	}
	// At every size the choice costs no more than any algorithm that
	// could run instead.
	for size := 1; size <= 1<<30; size *= 2 {
		got := chooseAllReduce(n, size, size <= small, true, hosts, per)
		cost := map[algorithm]float64{algoRing: ringCost(n, float64(size)), algoHier: hierCost(hosts, per, float64(size))}
		if size <= small {
			cost[algoTree] = treeCost(n, float64(size))
		}
		for a, c := range cost {
			if c < cost[got] {
				t.Fatalf("%d bytes: chose %d at %g s, but %d costs %g s", size, got, cost[got], a, c)
			}
		}
	}
	// SmallBytes set by hand: the tree up to it, the hierarchy above.
	if chooseAllReduce(n, 64, true, false, hosts, per) != algoTree || chooseAllReduce(n, 256<<20, false, false, hosts, per) != algoHier {
		t.Fatal("an explicit SmallBytes does not keep the tree below it and the hierarchy above")
	}
	// Without hosts, the tree up to DefaultSmallBytes and the ring above.
	if chooseAllReduce(64, 8, true, true, 0, 0) != algoTree || chooseAllReduce(64, 1<<20, false, true, 0, 0) != algoRing {
		t.Fatal("a flat world does not choose between the tree and the ring")
	}
}
