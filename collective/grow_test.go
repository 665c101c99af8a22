package collective

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestGrowJoinsANewcomer grows a world of 3 to 4 in place: the members
// keep their communicators' ports and ranks, a newcomer on a new port
// takes rank 3, gets a member's state by broadcast, and all four
// allreduce.
func TestGrowJoinsANewcomer(t *testing.T) {
	forRejoinLinks(t, testGrow)
}

func testGrow(t *testing.T, l testLink) {
	const world = 3
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	var base Config
	comms := cluster(t, world, l.on(func(r int, cfg *Config) {
		withToken(r, cfg)
		if r == 0 {
			base = *cfg
		}
	}))
	mustSumRanks(ctx, t, comms)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := append(slices.Clone(comms[0].peers), ln.Addr().String())
	incs := []uint32{0, 0, 0, 1}
	ncfg := replacementConfig(t, base, world, peers, incs)
	ncfg.WorldSize, ncfg.Listener = world+1, ln

	next := make([]*Comm, world+1)
	errs := make([]error, world+1)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next[r], errs[r] = c.Grow(ctx, peers, incs)
		}()
	}
	t.Cleanup(func() {
		for _, c := range next {
			if c != nil {
				c.Close()
			}
		}
	})
	next[world], errs[world] = New(ctx, ncfg)
	wg.Wait()
	mustAll(t, errs)

	for r, c := range next {
		if c.Rank() != r || c.WorldSize() != world+1 {
			t.Fatalf("rank %d after growing: rank %d of %d, want rank %d of %d", r, c.Rank(), c.WorldSize(), r, world+1)
		}
	}
	mustAll(t, onAll(t, next, func(c *Comm) error {
		s := []float64{0}
		if c.Rank() == 1 {
			s[0] = 42
		}
		if err := Broadcast(ctx, c, s, 1); err != nil {
			return err
		}
		if s[0] != 42 {
			t.Errorf("rank %d got state %v from rank 1, want 42", c.Rank(), s[0])
		}
		return nil
	}))
	mustSumRanks(ctx, t, next)
}

// TestGrowRefusesBadMembership checks the memberships a member must not
// grow to.
func TestGrowRefusesBadMembership(t *testing.T) {
	refusesMembership(t, (*Comm).Grow, []badMembership{
		{"same size", func(old []string) []string { return old }, []uint32{1, 1, 1}, "must be bigger"},
		{"members moved", func(old []string) []string { return append([]string{"127.0.0.1:1"}, old...) }, []uint32{0, 0, 0, 1}, "members keep their ranks"},
		{"incarnations", func(old []string) []string { return append(old, "127.0.0.1:1") }, []uint32{1}, "need one per rank"},
		{"epoch", func(old []string) []string { return append(old, "127.0.0.1:1") }, []uint32{0, 0, 0, 0}, "do not sum to more"},
	})
}
