package collective

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// needShm skips a test where this host cannot share memory between ranks.
func needShm(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(shmDir); err != nil || bootID() == "" {
		t.Skipf("no %s or boot id here: every stream stays on TCP", shmDir)
	}
}

// noSpin makes every wait on a ring sleep at once, the path where a lost
// wake-up would show, until the test ends.
func noSpin(t *testing.T) {
	old := shmSpinChecks
	shmSpinChecks = 0
	t.Cleanup(func() { shmSpinChecks = old })
}

// TestSharedMemoryWakeupNotLost: a piece published after the receiver
// found the ring empty but before it raised its flag is the moment a
// wake-up is lost: the sender sees no flag and rings nothing, and the
// receiver would sleep on a stream no byte will come to. The receiver's
// check after raising its flag finds the piece.
func TestSharedMemoryWakeupNotLost(t *testing.T) {
	needShm(t)
	noSpin(t)
	links := linkTwo(t, TCPLinker{}, TCPLinker{})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	var published atomic.Int32
	sendErr := make(chan error, 1)
	shmBeforeArm = func() {
		// Only once, on the receiver's first wait: the sender fills a
		// slot between the receiver's look and its flag.
		if published.Add(1) == 1 {
			sendErr <- links[0].Send(ctx, 1, []byte("late"))
		}
	}
	defer func() { shmBeforeArm = nil }()
	got := make([]byte, 4)
	if err := links[1].Recv(ctx, 0, got); err != nil {
		t.Fatalf("receive a piece published as the receiver went to sleep: %v", err)
	}
	if err := <-sendErr; err != nil || string(got) != "late" {
		t.Fatalf("got %q, send: %v", got, err)
	}
}

// TestSharedMemoryFullRingWakeupNotLost is the same moment for a sender
// that waits on a full ring: the receiver empties a slot between the
// sender's look and its flag.
func TestSharedMemoryFullRingWakeupNotLost(t *testing.T) {
	needShm(t)
	noSpin(t)
	links := linkTwo(t, TCPLinker{}, TCPLinker{})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	piece := make([]byte, shmSlotBytes)
	for range shmSlots {
		if err := links[0].Send(ctx, 1, piece); err != nil {
			t.Fatal(err)
		}
	}
	recvErr := make(chan error, 1)
	var once atomic.Int32
	shmBeforeArm = func() {
		if once.Add(1) == 1 {
			recvErr <- links[1].Recv(ctx, 0, piece)
		}
	}
	defer func() { shmBeforeArm = nil }()
	if err := links[0].Send(ctx, 1, []byte("one more")); err != nil {
		t.Fatalf("send into a ring emptied as the sender went to sleep: %v", err)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
}

// TestSharedMemoryPingPong races the two ends through many short
// exchanges each way at once, sleeping and spinning: every piece arrives,
// in order, and no wait outlives the deadline.
func TestSharedMemoryPingPong(t *testing.T) {
	needShm(t)
	iters := 20000
	if testing.Short() || testutil.RaceDetector {
		// A lost wakeup shows as a hang after enough round trips; the
		// race detector, ten times slower per round trip, gets the
		// short run's count and the full count runs without it
		// (RACE_SAMPLED_TESTS).
		iters = 2000
	}
	for _, spin := range []bool{false, true} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			if !spin {
				noSpin(t)
			}
			links := linkTwo(t, TCPLinker{}, TCPLinker{})
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
			defer cancel()
			var g errgroup.Group
			for r := range 2 {
				g.Go(func() error { return pingPong(ctx, links[r], r, iters) })
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// pingPong has rank r of two send its counter and check the other's,
// iters times; rank 0 sends first.
func pingPong(ctx context.Context, l *tcpLink, r, iters int) error {
	peer := 1 - r
	var out, in [8]byte
	for i := range iters {
		binary.LittleEndian.PutUint64(out[:], uint64(i))
		if r == 0 {
			if err := l.Send(ctx, peer, out[:]); err != nil {
				return fmt.Errorf("rank %d send %d: %w", r, i, err)
			}
		}
		if err := l.Recv(ctx, peer, in[:]); err != nil {
			return fmt.Errorf("rank %d receive %d: %w", r, i, err)
		}
		if got := binary.LittleEndian.Uint64(in[:]); got != uint64(i) {
			return fmt.Errorf("rank %d: received %d, want %d", r, got, i)
		}
		if r == 1 {
			if err := l.Send(ctx, peer, out[:]); err != nil {
				return fmt.Errorf("rank %d send %d: %w", r, i, err)
			}
		}
	}
	return nil
}
