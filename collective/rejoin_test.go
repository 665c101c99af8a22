package collective

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// replacementConfig is the Config of a new incarnation of rank in a
// communicator whose ranks otherwise have cfg's settings.
func replacementConfig(t *testing.T, cfg Config, rank int, peers []string, incs []uint32) Config {
	t.Helper()
	cfg.Rank = rank
	cfg.Peers = peers
	cfg.Incarnations = incs
	cfg.Listener = nil
	return cfg
}

// TestRejoinReplacesLostRank loses rank 2 of 3, has the survivors fail
// their allreduce with a recoverable error naming it, rejoin with a new
// incarnation of it on a new address, and hand it their state by
// broadcast; the lost incarnation, trying to come back, is refused. The
// in-memory link is left out: its pipes outlive a communicator.
func TestRejoinReplacesLostRank(t *testing.T) {
	forRejoinLinks(t, testRejoin)
}

// forRejoinLinks runs test over every link a communicator can rejoin or
// shrink over: not the in-memory one, whose pipes outlive a communicator.
func forRejoinLinks(t *testing.T, test func(t *testing.T, l testLink)) {
	for _, l := range testLinks {
		if l.name == "mem" {
			continue
		}
		t.Run("link="+l.name, func(t *testing.T) { test(t, l) })
	}
}

// loseRank starts world ranks over l, has them allreduce once, then
// closes rank lost's communicator and checks that the survivors' next
// allreduce fails, blaming it, with an error they can recover from. It
// returns every rank's communicator and the lost rank's Config.
func loseRank(ctx context.Context, t *testing.T, l testLink, world, lost int) ([]*Comm, Config) {
	t.Helper()
	var base Config
	comms := cluster(t, world, l.on(func(r int, cfg *Config) {
		withToken(r, cfg)
		if r == lost {
			base = *cfg
		}
	}))
	mustAll(t, onAll(t, comms, func(c *Comm) error {
		return AllReduce(ctx, c, []float64{1}, Sum)
	}))
	comms[lost].Close()
	survivors := slices.Delete(slices.Clone(comms), lost, lost+1)
	for r, err := range onAll(t, survivors, func(c *Comm) error {
		return AllReduce(ctx, c, []float64{1}, Sum)
	}) {
		if got, ok := LostRank(err); !ok || got != lost {
			t.Fatalf("survivor %d: allreduce error %v: LostRank = %d, %v; want %d, true", r, err, got, ok, lost)
		}
	}
	return comms, base
}

// awaitClosed waits until every communicator of comms is closed: until a
// survivor has closed its failed communicator, that one answers (and
// refuses any link). Close marks a communicator closed first and stops
// its mesh after, which on a loaded machine can answer a handshake in
// between: once the mark is seen, a second Close waits for the first to
// end (it is idempotent, and a Once's callers wait for its first call).
func awaitClosed(t *testing.T, comms []*Comm) {
	t.Helper()
	testutil.WaitFor(t, time.Minute, func() error {
		for r, c := range comms {
			if !c.closed.Load() {
				return fmt.Errorf("communicator %d is not closed", r)
			}
		}
		return nil
	})
	for _, c := range comms {
		c.Close()
	}
}

func testRejoin(t *testing.T, l testLink) {
	const world, lost = 3, 2
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	state := []float64{0, 0}
	comms, base := loseRank(ctx, t, l, world, lost)

	// The replacement: the same rank, a new address, the next incarnation.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := slices.Clone(comms[0].peers)
	stalePeers := slices.Clone(peers)
	peers[lost] = ln.Addr().String()
	incs := []uint32{0, 0, 1}
	rcfg := replacementConfig(t, base, lost, peers, incs)
	rcfg.Listener = ln

	// The survivors rejoin first. The lost incarnation comes back (it
	// was only cut off) and tries to join them with what it knew while
	// they wait for rank 2: they refuse it for good, and then link to the
	// replacement.
	next := make([]*Comm, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range lost {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next[r], errs[r] = comms[r].Rejoin(ctx, peers, incs)
		}()
	}
	t.Cleanup(func() {
		for _, c := range next {
			if c != nil {
				c.Close()
			}
		}
	})
	awaitClosed(t, comms[:lost])
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stalePeers[lost] = sln.Addr().String()
	scfg := replacementConfig(t, base, lost, stalePeers, nil)
	scfg.Listener = sln
	scfg.ConnectTimeout = testutil.Scale(5 * time.Second)
	if stale, err := New(ctx, scfg); !errors.Is(err, ErrReplaced) {
		if stale != nil {
			stale.Close()
		}
		t.Fatalf("stale incarnation joined: err = %v, want ErrReplaced", err)
	}
	next[lost], errs[lost] = New(ctx, rcfg)
	wg.Wait()
	mustAll(t, errs)

	// A survivor hands the replacement the state, then all train on.
	mustAll(t, onAll(t, next, func(c *Comm) error {
		s := make([]float64, len(state))
		if c.Rank() == 0 {
			s = []float64{7, 42}
		}
		if err := Broadcast(ctx, c, s, 0); err != nil {
			return err
		}
		if !slices.Equal(s, []float64{7, 42}) {
			return errors.New("broadcast state differs")
		}
		return nil
	}))
	mustSumRanks(ctx, t, next)
}

// mustSumRanks checks that comms allreduce correctly: the sum of their
// ranks.
func mustSumRanks(ctx context.Context, t *testing.T, comms []*Comm) {
	t.Helper()
	n := len(comms)
	mustAll(t, onAll(t, comms, func(c *Comm) error {
		v := []float64{float64(c.Rank())}
		if err := AllReduce(ctx, c, v, Sum); err != nil {
			return err
		}
		if v[0] != float64(n*(n-1)/2) {
			return fmt.Errorf("rank %d of %d: allreduced the ranks to %v, want %d", c.Rank(), n, v[0], n*(n-1)/2)
		}
		return nil
	}))
}

// TestIncarnationHandshake checks each way two ranks' views of the
// incarnations can disagree: a stale dialer is refused for good with
// ErrReplaced, a dialer ahead of the listener is asked to wait.
func TestIncarnationHandshake(t *testing.T) {
	tests := []struct {
		name             string
		fromInc, toInc   uint32
		epoch            uint32
		status           uint8
		wantReasonPrefix string
	}{
		{"agree", 1, 0, 1, statusAccepted, ""},
		{"stale dialer", 0, 0, 0, statusRejected, replacedPrefix},
		{"dialer replaced again", 2, 0, 2, statusNotYet, "rank 0 has not yet heard of the replacement"},
		// A third rank was replaced, which the dialer has rejoined for.
		{"survivor ahead", 1, 0, 2, statusNotYet, "rank 0 has not yet heard of the replacement"},
		{"survivor behind", 1, 0, 0, statusNotYet, "rank 0 is at membership epoch 1, but rank 1 at 0"},
		{"listener replaced", 1, 1, 2, statusRejected, "rank 1 expects incarnation 1 of rank 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Mesh{cfg: MeshConfig{Rank: 0, WorldSize: 2, Incarnations: []uint32{0, 1}}}
			h := hello{from: 1, to: 0, world: 2, fromInc: tc.fromInc, toInc: tc.toInc, epoch: tc.epoch}
			reason, final := m.checkIncarnations(h)
			var status uint8
			switch {
			case reason == "":
				status = statusAccepted
			case final:
				status = statusRejected
			default:
				status = statusNotYet
			}
			if status != tc.status || len(reason) < len(tc.wantReasonPrefix) || reason[:len(tc.wantReasonPrefix)] != tc.wantReasonPrefix {
				t.Fatalf("status %d %q, want %d starting %q", status, reason, tc.status, tc.wantReasonPrefix)
			}
		})
	}
}

// TestLostRank tells the failures a replacement recovers from from the
// others.
func TestLostRank(t *testing.T) {
	tests := []struct {
		name string
		err  error
		rank int
		ok   bool
	}{
		{"lost", &PeerError{Rank: 2, Err: ErrPeerLost}, 2, true},
		{"stalled", fmt.Errorf("allreduce: %w", &PeerError{Rank: 1, Err: ErrPeerTimeout}), 1, true},
		{"mismatch", &PeerError{Rank: 1, Err: ErrMismatch}, -1, false},
		{"aborted", &PeerError{Rank: 0, Err: ErrAborted}, -1, false},
		{"replaced", &PeerError{Rank: 0, Err: ErrReplaced}, -1, false},
		{"no rank", ErrPeerLost, -1, false},
		{"nil", nil, -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if rank, ok := LostRank(tc.err); rank != tc.rank || ok != tc.ok {
				t.Fatalf("LostRank(%v) = %d, %v; want %d, %v", tc.err, rank, ok, tc.rank, tc.ok)
			}
		})
	}
}

// TestRejoinBadMembership checks that a membership a survivor cannot
// rejoin fails with an error naming what is wrong.
func TestRejoinBadMembership(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(peers []string) ([]string, []uint32)
		wants string
	}{
		{"short", func(p []string) ([]string, []uint32) { return p[:1], []uint32{0, 1} }, "1 addresses and 2 incarnations for world size 2"},
		{"moved", func(p []string) ([]string, []uint32) { return []string{"127.0.0.1:1", p[1]}, []uint32{0, 1} }, "its address changed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms := cluster(t, 2, nil)
			peers, incs := tc.edit(slices.Clone(comms[0].peers))
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
			defer cancel()
			_, err := comms[0].Rejoin(ctx, peers, incs)
			if err == nil || !strings.Contains(err.Error(), tc.wants) || !strings.Contains(err.Error(), "rank 0") {
				t.Fatalf("Rejoin: %v, want an error naming rank 0 and saying %q", err, tc.wants)
			}
		})
	}
	cfg := Config{Rank: 0, WorldSize: 2, Peers: []string{"127.0.0.1:1", "127.0.0.1:2"}, Incarnations: []uint32{0}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "1 incarnations for world size 2") {
		t.Fatalf("Validate: %v, want the incarnations counted", err)
	}
}
