package collective

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// onHost forces the host segment on every rank; futex makes ranks in
// this process sleep on the futex, as ranks in processes of their own do.
func onHost(futex bool, tweak func(rank int, cfg *Config)) func(rank int, cfg *Config) {
	return func(rank int, cfg *Config) {
		cfg.hostSegment = true
		cfg.hostFutex = futex
		if tweak != nil {
			tweak(rank, cfg)
		}
	}
}

// TestHostSegmentChosen checks when ranks get a host segment: by default
// on one host with shared memory, for allreduces up to hostMaxBytes and
// barriers; not over sockets alone, nor with the algorithm forced. No
// segment file outlives the setup.
func TestHostSegmentChosen(t *testing.T) {
	needShm(t)
	comms := cluster(t, 5, nil)
	for _, c := range comms {
		if c.host == nil || c.host.local == nil {
			t.Fatalf("rank %d: no host segment shared in this process", c.Rank())
		}
	}
	// The segment's file by name: other processes (a second make test
	// beside) make and remove segments in the same directory.
	if _, err := os.Stat(comms[0].host.path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("host segment file %s left after setup (stat: %v)", comms[0].host.path, err)
	}
	for size, want := range map[int]algorithm{8: algoHost, hostMaxBytes: algoHost, hostMaxBytes + 4: algoTree, 1 << 20: algoRing} {
		if got := comms[0].allReduceAlgo(size); got != want {
			t.Errorf("allreduce of %d bytes runs algorithm %d, want %d", size, got, want)
		}
	}
	mustAll(t, onAll(t, comms, func(c *Comm) error { return c.Barrier(context.Background()) }))
	for name, tweak := range map[string]func(int, *Config){
		"sockets": func(_ int, cfg *Config) { cfg.NoSharedMemory = true },
		"ring":    func(_ int, cfg *Config) { cfg.SmallBytes = -1 },
		"tree":    func(_ int, cfg *Config) { cfg.SmallBytes = 1 << 10 },
		"hosts":   func(_ int, cfg *Config) { cfg.RanksPerHost = 1 },
	} {
		if c := cluster(t, 3, tweak); c[0].host != nil {
			t.Errorf("%s: ranks got a host segment", name)
		}
	}
}

// TestHostSegmentPathIsPerGroup checks that the segment's name changes
// with every part of the group's identity, so that no other job,
// membership or incarnation, nor a later group of the same ranks (a new
// nonce), opens a segment another group left behind.
func TestHostSegmentPathIsPerGroup(t *testing.T) {
	base := Config{JobID: "j", Token: "t", Peers: []string{"h:1", "h:2"}, Incarnations: []uint32{0, 0}}
	var nonce [16]byte
	seen := map[string]string{hostSegmentPath(base, nonce): "base"}
	other := nonce
	other[15] = 1
	variants := map[string]func() (Config, [16]byte){
		"job":         func() (Config, [16]byte) { c := base; c.JobID = "k"; return c, nonce },
		"token":       func() (Config, [16]byte) { c := base; c.Token = "u"; return c, nonce },
		"peers":       func() (Config, [16]byte) { c := base; c.Peers = []string{"h:1", "h:3"}; return c, nonce },
		"incarnation": func() (Config, [16]byte) { c := base; c.Incarnations = []uint32{0, 1}; return c, nonce },
		"nonce":       func() (Config, [16]byte) { return base, other },
	}
	for name, v := range variants {
		p := hostSegmentPath(v())
		if prev, ok := seen[p]; ok {
			t.Errorf("%s: same segment as %s: %s", name, prev, p)
		}
		seen[p] = name
	}
}

// TestHostSegmentWakeupNotLost runs many small allreduces and barriers on
// the host segment with every wait asleep at once and no slice to recover
// a lost wake-up: a waiter that missed the last arriver's wake would
// sleep until the test's deadline. Both ways of sleeping: on a channel
// (every rank in this process) and on the futex.
func TestHostSegmentWakeupNotLost(t *testing.T) {
	needShm(t)
	defer func(spins int, lo, hi time.Duration) { hostSpins, hostSliceMin, hostSliceMax = spins, lo, hi }(hostSpins, hostSliceMin, hostSliceMax)
	hostSpins, hostSliceMin, hostSliceMax = 0, time.Hour, time.Hour
	for _, futex := range []bool{false, true} {
		for _, n := range []int{2, 5, 9} {
			t.Run(fmt.Sprintf("futex=%v/world=%d", futex, n), func(t *testing.T) {
				comms := cluster(t, n, onHost(futex, func(_ int, cfg *Config) { cfg.Timeout = time.Hour }))
				if (comms[0].host.local == nil) != futex {
					t.Fatalf("ranks sleep on the futex: %v, want %v", comms[0].host.local == nil, futex)
				}
				const iters = 1000
				mustAll(t, onAll(t, comms, func(c *Comm) error {
					for i := range iters {
						data := []float32{float32(c.Rank() + i), 1}
						if err := AllReduce(context.Background(), c, data, Sum); err != nil {
							return err
						}
						if want := float32(n*i + n*(n-1)/2); data[0] != want || data[1] != float32(n) {
							return fmt.Errorf("allreduce %d: got %v, want [%v %d]", i, data, want, n)
						}
						if i%10 == 0 {
							if err := c.Barrier(context.Background()); err != nil {
								return err
							}
						}
					}
					return nil
				}))
			})
		}
	}
}

// TestHostSegmentMissingRank has one rank never enter an allreduce: every
// other rank fails once the collective timeout passed without an
// arrival, naming it, rather than waiting for ever.
func TestHostSegmentMissingRank(t *testing.T) {
	needShm(t)
	for _, futex := range []bool{false, true} {
		t.Run(fmt.Sprintf("futex=%v", futex), func(t *testing.T) {
			const n, missing = 4, 2
			comms := cluster(t, n, onHost(futex, func(_ int, cfg *Config) { cfg.Timeout = testutil.Scale(500 * time.Millisecond) }))
			errs := onAll(t, comms[:missing], func(c *Comm) error {
				return AllReduce(context.Background(), c, []float64{1}, Sum)
			})
			errs = append(errs, onAll(t, comms[missing+1:], func(c *Comm) error {
				return AllReduce(context.Background(), c, []float64{1}, Sum)
			})...)
			for i, err := range errs {
				r := i
				if r >= missing {
					r++
				}
				blamed(t, r, err, missing, ErrPeerTimeout)
			}
		})
	}
}

// TestHostSegmentCancel cancels one rank's wait: it fails with the
// context's error and the others hear that it gave up.
func TestHostSegmentCancel(t *testing.T) {
	needShm(t)
	for _, futex := range []bool{false, true} {
		t.Run(fmt.Sprintf("futex=%v", futex), func(t *testing.T) {
			comms := cluster(t, 3, onHost(futex, nil))
			ctx, cancel := context.WithCancel(context.Background())
			res := make(chan error, 1)
			go func() { res <- AllReduce(ctx, comms[0], []float32{1}, Sum) }()
			mesh := comms[0].t.(*meshTransport).mesh
			testutil.WaitFor(t, 20*time.Second, testutil.Holds("rank 0 to wait", func() bool { return mesh.recvPeer.Load() != 0 }))
			cancel()
			if err := <-res; !errors.Is(err, context.Canceled) {
				t.Fatalf("rank 0: got %v, want context.Canceled", err)
			}
			errs := onAll(t, comms[1:], func(c *Comm) error { return AllReduce(context.Background(), c, []float32{1}, Sum) })
			for i, err := range errs {
				blamed(t, i+1, err, 0, ErrAborted)
			}
		})
	}
}

// TestHostSegmentLeftoverFile leaves a used segment where a group of the
// same job, ranks and addresses would put its own without a fresh nonce,
// as a rank killed before every rank mapped it leaves one: the group
// draws a new nonce, so it maps a segment of its own and runs on it.
func TestHostSegmentLeftoverFile(t *testing.T) {
	needShm(t)
	const n = 3
	comms := cluster(t, n, func(r int, cfg *Config) {
		if r != 0 {
			return
		}
		stale := make([]byte, hostSegmentBytes(n))
		stale[hostOffAttached] = n - 1
		stale[hostOffArrivals] = 1
		path := hostSegmentPath(*cfg, [16]byte{})
		if err := os.WriteFile(path, stale, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
	})
	if comms[0].host == nil {
		t.Fatal("the group has no host segment")
	}
	checkAllReduce[float32](t, comms, 3, Sum)
}

// TestHostSegmentKilledRank SIGKILLs one rank of a group of processes in
// the thick of small allreduces on the host segment: the others fail
// within the collective timeout naming it, never hang, and a new group of
// the same ranks, job and addresses (as a restarted gang has) runs on a
// segment of its own, whatever the killed rank left in the old one.
func TestHostSegmentKilledRank(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	needShm(t)
	const world, victim = 4, 2
	procs := startChildren(t, world, "3", "small-allreduce", childSmallEnv+"=0", childItersEnv+"=100000000", childPrintEnv+"=100")
	awaitIters(t, procs, 1)
	if err := procs[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("peer rank %d (%s)", victim, peerAddr(procs, victim))
	for r, p := range procs {
		if r == victim {
			continue
		}
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			t.Fatalf("rank %d still running a minute after rank %d was killed", r, victim)
		}
		if msg := p.stderr.String(); !strings.Contains(msg, want) {
			t.Fatalf("rank %d: exit %v, error %q does not name %q", r, p.err, msg, want)
		}
	}
	peers := make([]string, world)
	for r := range world {
		peers[r] = peerAddr(procs, r)
	}
	again := startChildrenAt(t, peers, "20", "small-allreduce", childSmallEnv+"=0", childItersEnv+"=300")
	for r, p := range again {
		select {
		case <-p.exited:
		case <-time.After(testutil.Scale(2 * time.Minute)):
			t.Fatalf("new group: rank %d still running after 2 minutes", r)
		}
		if p.err != nil {
			t.Fatalf("new group: rank %d: %v\n%s", r, p.err, p.stderr)
		}
	}
}
