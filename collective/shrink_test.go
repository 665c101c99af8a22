package collective

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestShrinkKeepsSurvivors loses rank 1 of 4 and has the three survivors
// form a world of 3 with the same communicators' processes and ports,
// renumbered in the order of the new peer list; the lost rank, coming
// back with the old world's membership, is refused with ErrReplaced.
func TestShrinkKeepsSurvivors(t *testing.T) {
	forRejoinLinks(t, testShrink)
}

func testShrink(t *testing.T, l testLink) {
	const world, lost = 4, 1
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	comms, base := loseRank(ctx, t, l, world, lost)
	oldPeers := slices.Clone(comms[0].peers)
	survivors := []*Comm{comms[0], comms[2], comms[3]}

	peers := []string{oldPeers[0], oldPeers[2], oldPeers[3]}
	incs := []uint32{1, 1, 1}
	next := make([]*Comm, len(survivors))
	errs := make([]error, len(survivors))
	var wg sync.WaitGroup
	for i, c := range survivors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next[i], errs[i] = c.Shrink(ctx, peers, incs)
		}()
	}
	t.Cleanup(func() {
		for _, c := range next {
			if c != nil {
				c.Close()
			}
		}
	})
	// The lost rank was only cut off: it tries the old world again once
	// the survivors listen for the new one, and is refused for good.
	awaitClosed(t, survivors)
	stale := replacementConfig(t, base, lost, oldPeers, nil)
	stale.ConnectTimeout = testutil.Scale(5 * time.Second)
	if c, err := New(ctx, stale); !errors.Is(err, ErrReplaced) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("the lost rank joined the old world again: err = %v, want ErrReplaced", err)
	}
	wg.Wait()
	mustAll(t, errs)

	for i, c := range next {
		if c.Rank() != i || c.WorldSize() != 3 {
			t.Fatalf("survivor %d: rank %d of %d, want rank %d of 3", i, c.Rank(), c.WorldSize(), i)
		}
	}
	mustSumRanks(ctx, t, next)
}

// TestShrinkRefusesBadMembership checks the memberships a survivor must
// not shrink to.
func TestShrinkRefusesBadMembership(t *testing.T) {
	refusesMembership(t, (*Comm).Shrink, []badMembership{
		{"same size", func(old []string) []string { return old }, []uint32{1, 1, 1}, "must be smaller"},
		{"incarnations", func(old []string) []string { return old[:2] }, []uint32{1}, "need one per rank"},
		{"epoch", func(old []string) []string { return old[:2] }, []uint32{0, 0}, "do not sum to more"},
		{"not a member", func(old []string) []string { return old[1:] }, []uint32{1, 1}, "not among the new world's"},
	})
}

// badMembership is a membership that rank 0 of a world of 3 must refuse
// to move to, and the error it must give.
type badMembership struct {
	name  string
	peers func(old []string) []string
	incs  []uint32
	want  string
}

// refusesMembership checks that move (Comm.Shrink or Comm.Grow) refuses
// each of tests, naming rank 0, and closes the old communicator anyway.
func refusesMembership(t *testing.T, move func(*Comm, context.Context, []string, []uint32) (*Comm, error), tests []badMembership) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms := cluster(t, 3, nil)
			c, err := move(comms[0], context.Background(), tc.peers(slices.Clone(comms[0].peers)), tc.incs)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rank 0") {
				if c != nil {
					c.Close()
				}
				t.Fatalf("error %v, want one naming rank 0 and containing %q", err, tc.want)
			}
			if !comms[0].closed.Load() {
				t.Fatal("a refused change left the old communicator open")
			}
		})
	}
}

// TestShrinkHandshake checks hellos between members of a world of 4 and
// of the world of 3 it shrank to: a member still in the old world asks a
// shrunk dialer to wait for it, a shrunk member refuses the old world for
// good.
func TestShrinkHandshake(t *testing.T) {
	old := &Mesh{cfg: MeshConfig{Rank: 2, WorldSize: 4, Peers: make([]string, 4)}}
	shrunk := &Mesh{cfg: MeshConfig{Rank: 1, WorldSize: 3, Peers: make([]string, 3), Incarnations: []uint32{1, 1, 1}}}
	tests := []struct {
		name       string
		m          *Mesh
		h          hello
		final      bool
		wantPrefix string
	}{
		{"old member, shrunk dialer", old, hello{from: 0, to: 1, world: 3, fromInc: 1, toInc: 1, epoch: 3}, false, "rank 2 has not yet heard of the world of 3"},
		{"shrunk member, old dialer", shrunk, hello{from: 3, to: 2, world: 4, epoch: 0}, true, replacedPrefix},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.h.order, tc.h.version, tc.h.jobID = byteOrderMark, protoVersion, tc.m.cfg.JobID
			if reason, _ := tc.m.checkHello(tc.h); reason != "" {
				t.Fatalf("checkHello refused the hello before its membership was compared: %s", reason)
			}
			reason, final := tc.m.checkIncarnations(tc.h)
			if final != tc.final || !strings.HasPrefix(reason, tc.wantPrefix) {
				t.Fatalf("checkIncarnations = %q, final %v; want final %v and a reason starting %q", reason, final, tc.final, tc.wantPrefix)
			}
		})
	}
}
