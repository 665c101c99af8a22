package collective

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// hostWait waits until the operation that gen was g0 for completes: it
// polls, then sleeps (on wake when every rank is in this process, else on
// the futex), and fails when the mesh failed (a peer lost, an abort,
// Close), ctx is done, a rank posted a different call, or no rank arrived
// for the collective timeout.
func (c *Comm) hostWait(ctx context.Context, h header, g0 uint32, wake <-chan struct{}) error {
	g := c.host
	gen := g.gen()
	start := time.Now()
	for i := 0; i < hostSpins && time.Since(start) < hostSpinTime; i++ {
		if atomic.LoadUint32(gen) != g0 {
			return nil
		}
		runtime.Gosched()
	}
	var timer *time.Timer
	if wake == nil {
		stop := context.AfterFunc(ctx, func() { futexWake(gen) })
		defer stop()
	} else {
		timer = time.NewTimer(hostSliceMin)
		defer timer.Stop()
	}
	// Probes from other ranks learn whom this one waits on.
	defer g.mesh.noteActive(max(g.missing(h)[0], 0), false)()
	arrivals := g.word64(hostOffArrivals)
	seen, since := atomic.LoadUint64(arrivals), time.Now()
	probed := since
	slice := hostSliceMin
	for {
		if atomic.LoadUint32(gen) != g0 {
			return nil
		}
		if g.mesh.isFailed() {
			return g.failure()
		}
		if ctx.Err() != nil {
			g.mesh.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, c.rank, context.Cause(ctx)), c.rank, true)
			return g.failure()
		}
		if r := g.otherCall(h); r >= 0 && atomic.LoadUint32(gen) == g0 {
			return c.hostMismatch(h)
		}
		if a := atomic.LoadUint64(arrivals); a != seen {
			seen, since = a, time.Now()
		} else if time.Since(since) >= c.cfg.Timeout {
			return c.hostTimeout(h)
		}
		if time.Since(probed) >= hostProbeEvery {
			probed = time.Now()
			if err := c.hostProbe(h); err != nil {
				return err
			}
		}
		if wake != nil {
			timer.Reset(min(slice, c.cfg.Timeout))
			select {
			case <-wake:
			case <-ctx.Done():
			case <-g.mesh.Done():
			case <-timer.C:
			}
		} else {
			w := g.word32(hostOffWaiters)
			atomic.AddUint32(w, 1)
			if atomic.LoadUint32(gen) == g0 {
				futexWait(gen, g0, min(slice, c.cfg.Timeout))
			}
			atomic.AddUint32(w, ^uint32(0))
		}
		slice = min(2*slice, hostSliceMax)
	}
}

// hostLocal is what the ranks of one host segment that run in this
// process share: when that is every rank of the group (tests, benchmarks,
// a trainer running its ranks as goroutines), sleepers wait on a channel
// that the last arriver closes, which the Go scheduler wakes without a
// thread per sleeper.
type hostLocal struct {
	members int                           // ranks in this process; under hostLocals.mu
	wake    atomic.Pointer[chan struct{}] // closed when gen next moves
}

// hostLocals maps a segment's path to its ranks in this process.
var hostLocals = &hostLocalMap{m: make(map[string]*hostLocal)}

type hostLocalMap struct {
	sync.Mutex
	m map[string]*hostLocal
}

// joinLocal counts a rank of the segment at path in.
func joinLocal(path string) *hostLocal {
	hostLocals.Lock()
	defer hostLocals.Unlock()
	l := hostLocals.m[path]
	if l == nil {
		l = &hostLocal{}
		ch := make(chan struct{})
		l.wake.Store(&ch)
		hostLocals.m[path] = l
	}
	l.members++
	return l
}

// leaveLocal counts a rank of the segment at path out.
func leaveLocal(path string) {
	hostLocals.Lock()
	defer hostLocals.Unlock()
	if l := hostLocals.m[path]; l != nil {
		if l.members--; l.members == 0 {
			delete(hostLocals.m, path)
		}
	}
}

// get returns the ranks in this process of the segment at path.
func (h *hostLocalMap) get(path string) *hostLocal {
	h.Lock()
	defer h.Unlock()
	return h.m[path]
}

// allLocal reports whether all n ranks of the segment at path joined from
// this process. Called after every rank joined.
func allLocal(path string, n int) bool {
	hostLocals.Lock()
	defer hostLocals.Unlock()
	l := hostLocals.m[path]
	return l != nil && l.members == n
}

// hostProbeEvery is how often a rank waiting on the host segment checks
// that the first rank still missing is alive: a rank whose process died
// never arrives, and nothing else tells the others before the timeout.
var hostProbeEvery = time.Second

// hostProbe checks, on the lowest rank that entered h, that the first
// rank that has not is alive: a refused connection to its peer port means
// its process is gone, and the communicator fails blaming it. One rank
// probes, so that a group waiting on a slow rank costs that rank one
// connection a second.
func (c *Comm) hostProbe(h header) error {
	g := c.host
	missing := g.missing(h)
	if missing[0] < 0 || slices.Index(missing, c.rank) >= 0 {
		return nil
	}
	for r := range c.rank {
		if !slices.Contains(missing, r) {
			return nil // a lower rank probes
		}
	}
	peer := missing[0]
	_, err := g.mesh.probe(peer)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	lost := &PeerError{Rank: peer, Addr: c.peerAddr(peer),
		Err: fmt.Errorf("%w: rank %d did not enter %s, and its peer port refuses connections: %v", ErrPeerLost, peer, h, err)}
	g.mesh.fail(lost, peer, true)
	return g.failure()
}
