package ps

import (
	"fmt"
	"slices"
	"testing"
)

func servers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("host-%d:7000", i)
	}
	return out
}

// The ring spreads keys evenly, sequential ids included.
func TestRingBalance(t *testing.T) {
	for _, n := range []int{1, 2, 4, 7} {
		r, err := NewRing(1, servers(n), 0)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]int, n)
		const keys = 200_000
		for k := range uint64(keys) {
			counts[r.Owner(k)]++
		}
		for s, c := range counts {
			share := float64(c) / keys * float64(n)
			if share < 0.8 || share > 1.2 {
				t.Errorf("%d servers: server %d holds %.2f of its fair share (%v)", n, s, share, counts)
			}
		}
	}
}

// Removing a server moves only its keys: every other key stays put.
func TestRingMovesOnlyTheLeaversKeys(t *testing.T) {
	full, _ := NewRing(1, servers(4), 0)
	// Server 3 gone: a ring of its first three servers.
	less, _ := NewRing(2, servers(3), 0)
	moved := 0
	for k := range uint64(100_000) {
		a, b := full.Owner(k), less.Owner(k)
		if a != 3 && a != b {
			t.Fatalf("key %d moved from server %d to %d though server %d stayed", k, a, b, a)
		}
		if a == 3 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("server 3 owned no keys")
	}
}

func TestRingNeedsServers(t *testing.T) {
	if _, err := NewRing(1, nil, 0); err == nil {
		t.Fatal("a ring of no servers was built")
	}
}

func TestRangeOwner(t *testing.T) {
	got := []int{}
	for k := range uint64(10) {
		got = append(got, RangeOwner(k, 10, 3))
	}
	want := []int{0, 0, 0, 0, 1, 1, 1, 2, 2, 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Owner's jump table, sized by the ring's points, finds what a plain
// search of the points finds.
func TestRingOwnerMatchesSearch(t *testing.T) {
	for _, tc := range []struct{ servers, vnodes int }{{1, 0}, {2, 0}, {5, 0}, {3, 1}, {64, 0}, {600, 128}} {
		r, _ := NewRing(1, servers(tc.servers), tc.vnodes)
		// Small enough to stay in the nearest caches: every key is routed.
		if len(r.jump) > 8*len(r.points)+17 {
			t.Fatalf("%d points: a jump table of %d entries", len(r.points), len(r.jump))
		}
		for k := range uint64(50_000) {
			h := HashKey(k)
			i, _ := slices.BinarySearch(r.points, h)
			if i == len(r.points) {
				i = 0
			}
			if got, want := r.Owner(k), int(r.owners[i]); got != want {
				t.Fatalf("%d servers, %d points: key %d: Owner %d, search %d", tc.servers, len(r.points), k, got, want)
			}
		}
	}
}

// A dead server's keys fall to their first backup; the other keys stay.
func TestRingWithDead(t *testing.T) {
	r, _ := NewRing(1, servers(4), 0)
	d, err := r.WithDead(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != 2 || !d.Dead(1) || r.Dead(1) || d.Live() != 3 {
		t.Fatalf("version %d, dead %v (old ring %v), live %d", d.Version(), d.DeadServers(), r.DeadServers(), d.Live())
	}
	for k := range uint64(50_000) {
		reps := r.Replicas(nil, k, 1)
		if len(reps) != 2 || reps[0] == reps[1] {
			t.Fatalf("key %d: replicas %v", k, reps)
		}
		owner := d.Owner(k)
		switch {
		case owner == 1:
			t.Fatalf("key %d owned by the dead server", k)
		case reps[0] == 1 && owner != reps[1]:
			t.Fatalf("key %d of dead server 1 went to %d, not its backup %d", k, owner, reps[1])
		case reps[0] != 1 && owner != reps[0]:
			t.Fatalf("key %d moved from %d to %d", k, reps[0], owner)
		}
	}
	if _, err := d.WithDead(3, 0, 2, 3); err == nil {
		t.Fatal("a ring with every server dead was built")
	}
	one, _ := NewRing(1, servers(1), 0)
	if reps := one.Replicas(nil, 7, 2); len(reps) != 1 {
		t.Fatalf("one server, 2 backups asked: %v", reps)
	}
}

// A dense table's ranges are held by their server and the next servers by
// index; a dead server's range falls to its first backup, and the backups
// behind it move up.
func TestDenseHolders(t *testing.T) {
	r, _ := NewRing(1, servers(4), 0)
	const rows = 400 // 100 rows a server
	tests := []struct {
		dead []int
		key  uint64
		want []int
	}{
		{nil, 0, []int{0, 1}},
		{nil, 399, []int{3, 0}},
		{[]int{1}, 150, []int{2, 3}},
		{[]int{1}, 50, []int{0, 2}},
		{[]int{3, 0}, 350, []int{1, 2}},
		{[]int{0, 1, 2}, 10, []int{3}},
	}
	for _, tt := range tests {
		ring := r
		if len(tt.dead) > 0 {
			ring, _ = r.WithDead(2, tt.dead...)
		}
		got := ring.Holders(nil, tt.key, rows, 1)
		if !slices.Equal(got, tt.want) {
			t.Errorf("dead %v, row %d: holders %v, want %v", tt.dead, tt.key, got, tt.want)
		}
		if o := ring.OwnerOf(tt.key, rows); o != tt.want[0] {
			t.Errorf("dead %v, row %d: owner %d, want %d", tt.dead, tt.key, o, tt.want[0])
		}
	}
	// A sparse table's holders are its replicas on the ring.
	if got, want := r.Holders(nil, 77, 0, 2), r.Replicas(nil, 77, 2); !slices.Equal(got, want) {
		t.Errorf("sparse holders %v, replicas %v", got, want)
	}
}

// Sole names the only live server, and no one while several are.
func TestRingSole(t *testing.T) {
	r, _ := NewRing(1, servers(3), 0)
	if s := r.Sole(); s != -1 {
		t.Fatalf("3 live servers: Sole %d, want -1", s)
	}
	d, _ := r.WithDead(2, 0, 2)
	if s := d.Sole(); s != 1 {
		t.Fatalf("servers 0 and 2 dead: Sole %d, want 1", s)
	}
	for k := range uint64(1000) {
		if o := d.Owner(k); o != 1 {
			t.Fatalf("key %d owned by %d with only server 1 live", k, o)
		}
	}
	one, _ := NewRing(1, servers(1), 0)
	if s := one.Sole(); s != 0 {
		t.Fatalf("one server: Sole %d, want 0", s)
	}
}
