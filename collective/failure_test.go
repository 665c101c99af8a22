package collective

import (
	"context"
	"errors"
	"fmt"
	"github.com/spindle-ml/spindle/internal/testutil"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// crash makes c's rank vanish the way a killed process does: its sockets
// close without any notice to the other ranks.
func crash(c *Comm) {
	t := c.t.(*meshTransport)
	t.mesh.fail(errors.New("crashed"), t.mesh.cfg.Rank, false)
	t.mesh.ln.Close()
	t.link.Close()
}

// blamed checks that err is a *PeerError naming rank and wrapping kind.
func blamed(t *testing.T, who int, err error, rank int, kind error) {
	t.Helper()
	var pe *PeerError
	if !errors.As(err, &pe) {
		t.Fatalf("rank %d: got %v, want a *PeerError naming rank %d", who, err, rank)
	}
	if pe.Rank != rank || !errors.Is(err, kind) {
		t.Fatalf("rank %d: got %v, want rank %d blamed with %v", who, err, rank, kind)
	}
	if !strings.Contains(err.Error(), pe.Addr) || pe.Addr == "" {
		t.Fatalf("rank %d: error %q does not name the peer address", who, err)
	}
}

func TestPeerCrashMidAllReduce(t *testing.T) {
	onLinks(t, func(t *testing.T, link testLink) {
		for _, tc := range []struct{ world, victim int }{{2, 1}, {3, 0}, {4, 2}} {
			t.Run(fmt.Sprintf("world=%d/victim=%d", tc.world, tc.victim), func(t *testing.T) {
				// A long timeout: only the broken connections may end this.
				comms := cluster(t, tc.world, link.on(func(_ int, cfg *Config) {
					cfg.Timeout = time.Minute
					cfg.ChunkBytes = 4096
				}))
				var iters atomic.Int64
				done := make(chan []error, 1)
				go func() {
					done <- onAll(t, comms, func(c *Comm) error {
						data := make([]float32, 1<<16)
						for range 100000 {
							if err := AllReduce(context.Background(), c, data, Sum); err != nil {
								return err
							}
							iters.Add(1)
						}
						return errors.New("never interrupted")
					})
				}()
				testutil.WaitFor(t, 20*time.Second, testutil.Holds("allreduces to run", func() bool { return iters.Load() >= int64(3*tc.world) }))
				crash(comms[tc.victim])
				errs := <-done
				for r, err := range errs {
					if r != tc.victim {
						blamed(t, r, err, tc.victim, ErrPeerLost)
					}
				}
			})
		}
	})
}

func TestPeerStall(t *testing.T) {
	onLinks(t, func(t *testing.T, link testLink) {
		// With a token, the probes and notices that name the staller are
		// authenticated connections too.
		for _, token := range []string{"", testToken} {
			t.Run(fmt.Sprintf("token=%t", token != ""), func(t *testing.T) {
				const world, staller = 3, 2
				comms := cluster(t, world, link.on(func(_ int, cfg *Config) {
					cfg.Timeout = 500 * time.Millisecond
					cfg.Token = token
				}))
				errs := onAll(t, comms[:staller], func(c *Comm) error {
					return AllReduce(context.Background(), c, make([]float64, 1<<16), Sum)
				})
				for r, err := range errs {
					blamed(t, r, err, staller, ErrPeerTimeout)
				}
				// The staller was told, so it fails at once rather than blaming
				// a neighbour after its own timeout. The notice races with the
				// header of the allreduce its neighbour had started; when the
				// header wins, the staller reports the mismatch instead.
				start := time.Now()
				err := comms[staller].Barrier(context.Background())
				if !errors.Is(err, ErrMismatch) {
					blamed(t, staller, err, staller, ErrPeerTimeout)
				}
				if d := time.Since(start); d > 400*time.Millisecond {
					t.Logf("note: the stalled rank took %s to fail", d)
				}
			})
		}
	})
}

func TestCancelMidOperation(t *testing.T) {
	onLinks(t, func(t *testing.T, link testLink) {
		comms := cluster(t, 2, link.on(nil))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res := make(chan error, 1)
		go func() { res <- AllReduce(ctx, comms[0], make([]float32, 1000), Sum) }()
		// Rank 1 never joins: rank 0 blocks receiving from it.
		tr := comms[0].t.(*meshTransport).mesh
		testutil.WaitFor(t, 20*time.Second, testutil.Holds("rank 0 to block", func() bool { return tr.recvPeer.Load() != 0 }))
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("rank 0: got %v, want context.Canceled", err)
		}
		// Rank 1 heard that rank 0 gave up.
		err := AllReduce(context.Background(), comms[1], make([]float32, 1000), Sum)
		blamed(t, 1, err, 0, ErrAborted)
	})
}

func TestCloseMidOperation(t *testing.T) {
	onLinks(t, func(t *testing.T, link testLink) {
		comms := cluster(t, 3, link.on(nil))
		res := make(chan error, 1)
		go func() { res <- comms[0].Barrier(context.Background()) }()
		tr := comms[0].t.(*meshTransport).mesh
		testutil.WaitFor(t, 20*time.Second, testutil.Holds("rank 0 to block", func() bool { return tr.recvPeer.Load() != 0 }))
		comms[0].Close()
		if err := <-res; !errors.Is(err, ErrClosed) {
			t.Fatalf("rank 0: got %v, want ErrClosed", err)
		}
		errs := onAll(t, comms[1:], func(c *Comm) error { return c.Barrier(context.Background()) })
		for i, err := range errs {
			blamed(t, i+1, err, 0, ErrAborted)
		}
	})
}
