package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/faultproxy"
)

// Faults between two training processes: ranks 0 and 1 of three reach
// each other through fault proxies (rank 0 dials rank 1 through to01,
// rank 1 dials rank 0 through to10) over real TCP links; rank 2 talks to
// both directly.

// pairLinks is the proxies between ranks 0 and 1.
type pairLinks struct{ to01, to10 *faultproxy.Proxy }

// proxied starts a cluster of n ranks whose links between ranks 0 and 1
// go through fault proxies, with tweak applied to every rank's config.
func proxied(t *testing.T, n int, tweak func(rank int, cfg *Config)) ([]*Comm, pairLinks) {
	t.Helper()
	lns, peers := loopbackListeners(t, n)
	proxy := func(target string) *faultproxy.Proxy {
		p, err := faultproxy.New("127.0.0.1:0", target)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Serve(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
		return p
	}
	pl := pairLinks{to01: proxy(peers[1]), to10: proxy(peers[0])}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		seen := slices.Clone(peers)
		switch r {
		case 0:
			seen[1] = pl.to01.Addr()
		case 1:
			seen[0] = pl.to10.Addr()
		}
		cfg := Config{Rank: r, WorldSize: n, Peers: seen, Listener: lns[r], JobID: "test-job", Token: testToken,
			Timeout: testutil.Scale(10 * time.Second), ConnectTimeout: testutil.Scale(10 * time.Second), Logger: quietLogger()}
		if tweak != nil {
			tweak(r, &cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = New(ctx, cfg)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: New: %v", r, err)
		}
	}
	return comms, pl
}

// allReduces runs allreduces on every rank until stop is closed or one
// fails, and counts the rounds of rank 0.
func allReduces(t *testing.T, comms []*Comm, rounds *atomic.Int64, stop <-chan struct{}) []error {
	return onAll(t, comms, func(c *Comm) error {
		data := make([]float32, 1<<14)
		for {
			for i := range data {
				data[i] = 1
			}
			if err := AllReduce(context.Background(), c, data, Sum); err != nil {
				return err
			}
			if data[0] != float32(len(comms)) {
				return fmt.Errorf("allreduce gave %v, want %d", data[0], len(comms))
			}
			if c.rank == 0 {
				rounds.Add(1)
			}
			select {
			case <-stop:
				return nil
			default:
			}
			// Every rank stops after the same round: rank 0's count is
			// read by all only through the agreed stop below.
		}
	})
}

// TestPartitionBetweenTwoRanks: a full or one-way partition between ranks
// 0 and 1 fails every rank within the collective timeout, never a hang,
// each naming one of the two ranks cut off.
func TestPartitionBetweenTwoRanks(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(pairLinks)
	}{
		{"full", func(pl pairLinks) { pl.to01.Set(faultproxy.Blackhole); pl.to10.Set(faultproxy.Blackhole) }},
		// Bytes from rank 0 to rank 1 vanish; rank 1's reach rank 0.
		{"one-way 0 to 1", func(pl pairLinks) {
			pl.to01.SetToTarget(faultproxy.Blackhole)
			pl.to10.SetToClient(faultproxy.Blackhole)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timeout := testutil.Scale(time.Second)
			comms, pl := proxied(t, 3, func(_ int, cfg *Config) {
				cfg.Timeout = timeout
				cfg.LinkCheck = -1
			})
			mustAll(t, onAll(t, comms, func(c *Comm) error {
				return AllReduce(context.Background(), c, make([]float32, 1<<14), Sum)
			}))
			tc.cut(pl)
			start := time.Now()
			errs := onAll(t, comms, func(c *Comm) error {
				for {
					if err := AllReduce(context.Background(), c, make([]float32, 1<<14), Sum); err != nil {
						return err
					}
				}
			})
			took := time.Since(start)
			for r, err := range errs {
				var pe *PeerError
				if !errors.As(err, &pe) || (pe.Rank != 0 && pe.Rank != 1) {
					t.Fatalf("rank %d: %v, want a *PeerError naming rank 0 or 1", r, err)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("rank %d", pe.Rank)) {
					t.Errorf("rank %d: %q does not name the rank", r, err)
				}
			}
			t.Logf("failed %s after the cut (timeout %s): %v", took.Round(time.Millisecond), timeout, errs)
		})
	}
}

// TestSlowAndLossyLinks: a delayed or lossy link between ranks 0 and 1
// does not fail the allreduces, and a slow one is reported, naming the
// pair and its round trip. The link check's period, the delay and the
// slow threshold stretch together (testutil.Scale): on a busy machine a
// healthy pair's round trip took 319 ms, over an unscaled 150 ms.
func TestSlowAndLossyLinks(t *testing.T) {
	period := testutil.Scale(50 * time.Millisecond)
	for _, tc := range []struct {
		name     string
		fault    func(pairLinks)
		wantSlow bool
	}{
		{"delay", func(pl pairLinks) { pl.to01.SetDelay(2 * period); pl.to10.SetDelay(2 * period) }, true},
		{"loss", func(pl pairLinks) { pl.to01.SetLoss(0.2, 1); pl.to10.SetLoss(0.2, 2) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reports := make(chan SlowLink, 100)
			comms, pl := proxied(t, 3, func(_ int, cfg *Config) {
				cfg.LinkCheck = period
				cfg.SlowLink = 3 * period
				cfg.OnSlowLink = func(s SlowLink) {
					select {
					case reports <- s:
					default:
					}
				}
			})
			tc.fault(pl)
			var rounds atomic.Int64
			stop := make(chan struct{})
			done := make(chan []error, 1)
			go func() { done <- allReduces(t, comms, &rounds, stop) }()
			var slow *SlowLink
			testutil.WaitFor(t, 20*time.Second, testutil.Holds("allreduces through the fault, and a slow link reported", func() bool {
				select {
				case s := <-reports:
					if slow == nil {
						slow = &s
					}
				default:
				}
				return rounds.Load() >= 5 && (slow != nil || !tc.wantSlow)
			}))
			close(stop)
			// Ranks stop after different rounds: the ones still in an
			// allreduce are let go by closing every communicator.
			for _, c := range comms {
				c.Close()
			}
			for r, err := range <-done {
				if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrAborted) && !errors.Is(err, ErrPeerLost) {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			if slow != nil {
				pair := [2]int{min(slow.Rank, slow.Peer), max(slow.Rank, slow.Peer)}
				if pair != [2]int{0, 1} || slow.RoundTrip < slow.Threshold {
					t.Fatalf("slow link reported %+v, want the pair of ranks 0 and 1 above the threshold", *slow)
				}
				t.Logf("reported: rank %d to rank %d (%s), round trip %s", slow.Rank, slow.Peer, slow.Addr, slow.RoundTrip)
			}
		})
	}
}
