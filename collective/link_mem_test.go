package collective

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestMemLinkFaults breaks the network between ranks in the ways a real one
// breaks, through the in-memory link, and checks that every rank fails,
// none hangs, and each blames a rank at an end of the broken path with the
// kind of failure that path shows.
func TestMemLinkFaults(t *testing.T) {
	tests := []struct {
		name  string
		world int
		fault func(n *MemNetwork)
		kind  error
		ends  []int // the ranks that may be blamed
	}{
		{"drop", 3, func(n *MemNetwork) { n.Drop(1, 2, true) }, ErrPeerTimeout, []int{0, 1, 2}},
		{"partition", 3, func(n *MemNetwork) { n.Partition([]int{0, 1}, []int{2}) }, ErrPeerTimeout, []int{0, 1, 2}},
		{"delay beyond the timeout", 2, func(n *MemNetwork) { n.Delay(0, 1, time.Minute) }, ErrPeerTimeout, []int{0, 1}},
		{"break", 3, func(n *MemNetwork) { n.Break(0, 1) }, ErrPeerLost, []int{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			net := NewMemNetwork()
			comms := cluster(t, tc.world, func(_ int, cfg *Config) {
				cfg.Link = net.Linker()
				cfg.Timeout = 300 * time.Millisecond
				cfg.ChunkBytes = 4096
			})
			// The links work before the fault.
			mustAll(t, onAll(t, comms, func(c *Comm) error {
				return AllReduce(context.Background(), c, make([]float32, 1<<12), Sum)
			}))
			tc.fault(net)
			errs := onAll(t, comms, func(c *Comm) error {
				return AllReduce(context.Background(), c, make([]float32, 1<<14), Sum)
			})
			for r, err := range errs {
				var pe *PeerError
				if !errors.As(err, &pe) || !errors.Is(err, tc.kind) {
					t.Fatalf("rank %d: got %v, want a *PeerError wrapping %v", r, err, tc.kind)
				}
				if !containsInt(tc.ends, pe.Rank) {
					t.Fatalf("rank %d blames rank %d, want one of %v: %v", r, pe.Rank, tc.ends, err)
				}
			}
			// Sticky: the communicator stays failed.
			if err := comms[0].Barrier(context.Background()); err == nil {
				t.Fatal("barrier after a failure succeeded")
			}
		})
	}
}

// TestMemLinkDelay checks that latency below the timeout is not a failure:
// the timeout measures lack of progress, and the results stay exact.
func TestMemLinkDelay(t *testing.T) {
	const n = 3
	net := NewMemNetwork()
	comms := cluster(t, n, func(_ int, cfg *Config) {
		cfg.Link = net.Linker()
		cfg.Timeout = time.Second
		cfg.ChunkBytes = 1024
	})
	net.Delay(0, 1, 2*time.Millisecond)
	net.Delay(2, 0, 5*time.Millisecond)
	in := make([][]float64, n)
	for r := range n {
		in[r] = inputs[float64](r, 3000)
	}
	want := ringReference(in, Sum)
	got := make([][]float64, n)
	mustAll(t, onAll(t, comms, func(c *Comm) error {
		got[c.Rank()] = append([]float64(nil), in[c.Rank()]...)
		return AllReduce(context.Background(), c, got[c.Rank()], Sum)
	}))
	for r := range n {
		for i := range want {
			if got[r][i] != want[i] {
				t.Fatalf("rank %d element %d = %v, want %v", r, i, got[r][i], want[i])
			}
		}
	}
}

// TestMemLinkRing checks the in-memory link's ring buffer across wraps, with
// messages larger than its buffer.
func TestMemLinkRing(t *testing.T) {
	net := NewMemNetwork()
	comms := cluster(t, 2, func(_ int, cfg *Config) { cfg.Link = net.Linker() })
	counts := []int{1, 1000, memPipeBytes/8 + 17, 3 * memPipeBytes / 8}
	if testutil.RaceDetector {
		// memPipeBytes/8+17 values already overflow the pipe; three
		// pipes' worth runs without the detector (RACE_SAMPLED_TESTS).
		counts = counts[:3]
	}
	for _, count := range counts {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			bufs := make([][]float64, 2)
			mustAll(t, onAll(t, comms, func(c *Comm) error {
				bufs[c.Rank()] = inputs[float64](c.Rank(), count)
				return AllReduce(context.Background(), c, bufs[c.Rank()], Sum)
			}))
			want := ringReference([][]float64{inputs[float64](0, count), inputs[float64](1, count)}, Sum)
			for r := range 2 {
				for i := range want {
					if bufs[r][i] != want[i] {
						t.Fatalf("rank %d element %d = %v, want %v", r, i, bufs[r][i], want[i])
					}
				}
			}
		})
	}
}
