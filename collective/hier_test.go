package collective

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/testutil"
)

func TestHierarchyLayout(t *testing.T) {
	// Four ranks a host, consecutive.
	hr := newHierarchy(6, hostsOf(nil, 12, 4))
	if hr == nil || !slices.Equal(hr.local, []int{4, 5, 6, 7}) || hr.li != 2 || !slices.Equal(hr.cross, []int{2, 6, 10}) || hr.hi != 1 {
		t.Errorf("rank 6 of 12 in hosts of 4: %+v", hr)
	}
	// Hosts read from peer addresses, interleaved.
	peers := []string{"a:1", "b:1", "a:2", "b:2", "a:3", "b:3"}
	hr = newHierarchy(3, hostsOf(peers, 6, HostsFromPeers))
	if hr == nil || !slices.Equal(hr.local, []int{1, 3, 5}) || hr.li != 1 || !slices.Equal(hr.cross, []int{2, 3}) || hr.hi != 1 {
		t.Errorf("rank 3 on host b: %+v", hr)
	}
	for name, hosts := range map[string][]string{
		"one host":           {"a", "a", "a", "a"},
		"one rank per host":  {"a", "b", "c"},
		"uneven hosts":       {"a", "a", "a", "b", "b"},
		"single rank worlds": {"a"},
	} {
		if hr := newHierarchy(0, hosts); hr != nil {
			t.Errorf("%s: hierarchy %+v, want none", name, hr)
		}
	}
}

// Both ends of every hierarchical link ask for it.
func TestHierarchyLinksAreSymmetric(t *testing.T) {
	for _, shape := range [][2]int{{2, 2}, {3, 2}, {2, 5}, {4, 4}, {8, 8}} {
		n := shape[0] * shape[1]
		hosts := hostsOf(nil, n, shape[1])
		links := map[[2]int]bool{}
		for r := range n {
			for _, q := range newHierarchy(r, hosts).peers() {
				links[[2]int{r, q}] = true
			}
		}
		for l := range links {
			if !links[[2]int{l[1], l[0]}] {
				t.Fatalf("%d hosts of %d: rank %d links to %d but not back", shape[0], shape[1], l[0], l[1])
			}
		}
	}
}

// TestAllReduceHierarchical checks the hierarchical allreduce against the
// exact result on hosts simulated by rank groups, up to 8 hosts of 8
// ranks, over both links, with vectors shorter than a host, not divisible
// by the ranks, and long.
func TestAllReduceHierarchical(t *testing.T) {
	shapes := [][2]int{{2, 2}, {2, 3}, {3, 2}, {2, 4}, {4, 2}, {3, 4}, {2, 8}, {8, 8}}
	if testutil.RaceDetector {
		// 16 and 64 ranks are most of the test's time under -race and
		// check the index arithmetic of more hosts, not concurrency;
		// they run without the detector (RACE_SAMPLED_TESTS).
		shapes = shapes[:6]
	}
	if testing.Short() {
		shapes = [][2]int{{2, 2}, {3, 4}}
	}
	onLinks(t, func(t *testing.T, link testLink) {
		for _, shape := range shapes {
			hosts, per := shape[0], shape[1]
			n := hosts * per
			t.Run(fmt.Sprintf("hosts=%d/ranks=%d", hosts, per), func(t *testing.T) {
				comms := cluster(t, n, link.on(func(_ int, cfg *Config) {
					cfg.RanksPerHost = per
					cfg.SmallBytes = 64
					cfg.ChunkBytes = 1000
				}))
				if !comms[0].useHier(65) || comms[0].useHier(64) {
					t.Fatal("allreduce picks the wrong algorithm around SmallBytes")
				}
				for _, count := range []int{0, 1, per - 1, n - 1, n + 1, 1000, 4099} {
					for _, op := range []Op{Sum, Mean} {
						checkHierAllReduce[float32](t, comms, count, op)
						checkHierAllReduce[float64](t, comms, count, op)
					}
				}
			})
		}
	})
}

// checkHierAllReduce allreduces integer-valued vectors, whose sums are
// exact in any order, and checks every rank got the exact result, bit for
// bit.
func checkHierAllReduce[T Float](t *testing.T, comms []*Comm, count int, op Op) {
	t.Helper()
	n := len(comms)
	bufs := make([][]T, n)
	want := make([]float64, count)
	for r := range n {
		bufs[r] = make([]T, count)
		for i := range count {
			v := float64((r*31+i*7)%97 - 40)
			bufs[r][i] = T(v)
			want[i] += v
		}
	}
	ctx := context.Background()
	mustAll(t, onAll(t, comms, func(c *Comm) error { return AllReduce(ctx, c, bufs[c.Rank()], op) }))
	for i := range want {
		w := T(want[i])
		if op == Mean {
			w = T(want[i]) / T(n)
		}
		for r := range n {
			if math.Float64bits(float64(bufs[r][i])) != math.Float64bits(float64(w)) {
				t.Fatalf("%s of %d %T: rank %d element %d = %v, want %v", op, count, w, r, i, bufs[r][i], w)
			}
		}
	}
}

func TestRanksPerHostValidated(t *testing.T) {
	peers := []string{"a:1", "a:2", "a:3", "a:4"}
	for _, tc := range []struct {
		perHost int
		want    string
	}{{3, "does not divide world size 4"}, {-2, "want a count, 0 or HostsFromPeers"}} {
		err := Config{Rank: 0, WorldSize: 4, Peers: peers, RanksPerHost: tc.perHost}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RanksPerHost %d: %v, want %q", tc.perHost, err, tc.want)
		}
	}
	for _, ok := range []int{0, 2, 4, HostsFromPeers} {
		if err := (Config{Rank: 0, WorldSize: 4, Peers: peers, RanksPerHost: ok}).Validate(); err != nil {
			t.Errorf("RanksPerHost %d: %v", ok, err)
		}
	}
}
