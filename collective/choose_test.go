package collective

import (
	"fmt"
	"slices"
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

// TestOneHostCapsTheTree: with every rank on one host and the shared-memory
// link the tree stops at oneHostSmallBytes (the ring measured faster above
// it there); elsewhere, or with SmallBytes set, the cluster model decides.
func TestOneHostCapsTheTree(t *testing.T) {
	local := []string{"127.0.0.1:7001", "127.0.0.1:7002"}
	for i := range 30 {
		local = append(local, fmt.Sprintf("127.0.0.1:%d", 7003+i))
	}
	spread := slices.Clone(local)
	spread[5] = "10.0.0.6:7006"
	model := DefaultSmallBytes(len(local))
	for _, tc := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"one host", Config{WorldSize: len(local), Peers: local}, oneHostSmallBytes},
		{"one host, tcp linker", Config{WorldSize: len(local), Peers: local, Link: TCPLinker{}}, oneHostSmallBytes},
		{"two hosts", Config{WorldSize: len(local), Peers: spread}, model},
		{"no shared memory", Config{WorldSize: len(local), Peers: local, NoSharedMemory: true}, model},
		{"linker without shared memory", Config{WorldSize: len(local), Peers: local, Link: TCPLinker{NoSharedMemory: true}}, model},
		{"in-memory link", Config{WorldSize: len(local), Peers: local, Link: NewMemNetwork().Linker()}, model},
		{"set by the user", Config{WorldSize: len(local), Peers: local, SmallBytes: 1 << 20}, 1 << 20},
		{"ring forced", Config{WorldSize: len(local), Peers: local, SmallBytes: -1}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := smallBytesOf(tc.cfg); got != tc.want {
				t.Errorf("smallBytesOf = %d, want %d (the model gives %d)", got, tc.want, model)
			}
		})
	}
	if model <= oneHostSmallBytes {
		t.Fatalf("the model's %d bytes at %d ranks no longer exceed the cap: the test proves nothing", model, len(local))
	}
}
