package master

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// The leader keeps a connection open to every alive worker and watches it.
// A worker process that dies (SIGKILL, a crash) has its connections closed
// by its kernel at once, and its port refuses new ones: the leader declares
// such a worker lost after WorkerGoneTimeout instead of waiting out
// WorkerTimeout, so that the drivers of its executors hear of their loss
// in about a second. A worker cut off by the network keeps its connections
// open (nothing closes them) and is left to WorkerTimeout, as before; one
// that keeps heartbeating is never declared lost this way.
//
// A leader newly elected never held a connection to a worker that died
// before its term: it counts the worker down from the first time a plain
// TCP connection to its address is refused (the host answers, nothing
// listens), never from a connection attempt that times out (the host may
// be cut off).

// workerWatch is the watch of one worker incarnation at one address.
type workerWatch struct {
	addr, incarnation string
	cancel            context.CancelFunc
}

// watchStep is how often a watch whose connection is down looks again.
const watchStep = 50 * time.Millisecond

// syncWatches starts a watch for every alive worker that has none (or whose
// address or incarnation changed) and ends the watches of the others. It
// runs on the leader's loop only.
func (ls *leaderState) syncWatches() {
	if ls.m.cfg.WorkerGoneTimeout <= 0 {
		return
	}
	want := map[string]workerWatch{}
	ls.m.fsm.read(func(s *State, _ uint64) {
		for _, w := range s.Workers {
			if w.Alive && w.Addr != "" {
				want[w.ID] = workerWatch{addr: w.Addr, incarnation: w.Incarnation}
			}
		}
	})
	for id, w := range ls.watches {
		if n, ok := want[id]; !ok || n.addr != w.addr || n.incarnation != w.incarnation {
			w.cancel()
			delete(ls.watches, id)
		}
	}
	for id, n := range want {
		if _, ok := ls.watches[id]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(ls.ctx)
		n.cancel = cancel
		ls.watches[id] = n
		ls.goOwned(func() { ls.watchWorker(ctx, id, n.addr, n.incarnation) })
	}
}

// watchWorker holds a connection to the worker id at addr until ctx ends
// and declares the worker lost when workerGone says it is.
func (ls *leaderState) watchWorker(ctx context.Context, id, addr, incarnation string) {
	// A connection of its own: the shared one, which launches and stops
	// use, must not be left backing off from a dead worker's port when a
	// new worker process takes it.
	conn, err := rpc.NewClient(addr, rpc.ClientConfig{Options: ls.m.creds.DialOptions()})
	if err != nil {
		ls.logger.Warn("cannot watch worker", "worker", id, "addr", addr, "err", err)
		return
	}
	defer conn.Close()
	grace := ls.m.cfg.WorkerGoneTimeout
	var wasReady bool
	var down time.Time
	for {
		st := conn.GetState()
		now := time.Now()
		switch st {
		case connectivity.Ready:
			wasReady, down = true, time.Time{}
		case connectivity.Idle:
			// Idle after a closed connection, or never connected yet:
			// connect (again).
			conn.Connect()
			fallthrough
		default:
			if down.IsZero() && (wasReady || st == connectivity.TransientFailure && refuses(ctx, addr, grace/2)) {
				down = now
			}
		}
		ls.mu.Lock()
		seen := ls.workerSeen[id]
		ls.mu.Unlock()
		if workerGone(down, seen, now, st == connectivity.Ready, grace) {
			ls.declareGone(id, addr, incarnation, wasReady, now.Sub(down))
			return
		}
		wait := time.Hour
		switch {
		case !down.IsZero():
			wait = watchStep
		case !wasReady && st == connectivity.TransientFailure:
			// Never connected and not refused: look again while gRPC
			// backs off.
			wait = max(watchStep, grace/4)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		conn.WaitForStateChange(wctx, st)
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

// workerGone says whether a worker whose connection from the leader went
// down at down (zero: it is up) is gone at now: the connection has not come
// back (ready is false) for grace, and the worker has not been heard from
// (its last heartbeat at seen) for grace either.
func workerGone(down, seen, now time.Time, ready bool, grace time.Duration) bool {
	if grace <= 0 || down.IsZero() || ready {
		return false
	}
	return now.Sub(down) >= grace && now.Sub(seen) >= grace
}

// refuses says whether a TCP connection to addr is refused within timeout:
// the host is up and nothing listens at the port.
func refuses(ctx context.Context, addr string, timeout time.Duration) bool {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// declareGone records the worker as lost, unless it re-registered or was
// declared lost meanwhile. held says whether this leader's connection to
// it had been up.
func (ls *leaderState) declareGone(id, addr, incarnation string, held bool, down time.Duration) {
	var host string
	current := false
	ls.m.fsm.read(func(s *State, _ uint64) {
		if w, ok := s.Workers[id]; ok && w.Alive && w.Addr == addr && w.Incarnation == incarnation {
			current, host = true, w.Host
		}
	})
	if !current {
		return
	}
	msg := fmt.Sprintf("worker %s (host %s) is gone: its connection closed and %s refused new ones for %s",
		id, host, addr, down.Round(100*time.Millisecond))
	if !held {
		msg = fmt.Sprintf("worker %s (host %s) is gone: %s refused the leader's connections for %s",
			id, host, addr, down.Round(100*time.Millisecond))
	}
	if _, err := ls.m.apply(cmdWorkerLost, workerLostCmd{ID: id, Message: msg, TimeMS: nowMS()}); err != nil {
		ls.logger.Warn("record lost worker", "worker", id, "err", err)
		return
	}
	ls.logger.Warn("worker lost", "worker", id, "host", host, "why", "connection closed and refused",
		"down", down.Round(time.Millisecond))
}
