package collective

import (
	"context"
	"sync"
	"time"
)

// Defaults of the link watch (Config.LinkCheck, Config.SlowLink).
const (
	// DefaultLinkCheck is how often each rank times a probe of every peer
	// it has a data link with.
	DefaultLinkCheck = 2 * time.Second
	// DefaultSlowLink is the probe round trip past which a link is slow.
	// A probe is a connection, an authenticated hello each way and an
	// answer: a few round trips, well under a millisecond on a healthy
	// network.
	DefaultSlowLink = 250 * time.Millisecond
	// slowProbesToReport is how many slow probes in a row make a link
	// slow, so that one hiccup of a busy host is not reported.
	slowProbesToReport = 2
)

// SlowLink is a report of the link watch: the link from this rank to Peer
// was slow for its last probes.
type SlowLink struct {
	// Rank is this rank, Peer the rank at the other end, Addr its address.
	Rank, Peer int
	Addr       string
	// RoundTrip is how long the last probe of the peer took; when the
	// peer did not answer it (within a second), Err says why and
	// RoundTrip is how long it took to fail.
	RoundTrip time.Duration
	Err       error
	// Threshold is the round trip past which a link counts as slow.
	Threshold time.Duration
}

// linkWatch times a probe of each linked peer every interval and reports
// the links that stay slow: a slow link does not fail an operation (only
// no progress for the collective timeout does), but it slows every step
// of the ring, and the job's owner wants to know which pair it is.
type linkWatch struct {
	mesh      *Mesh
	peers     []int
	every     time.Duration
	threshold time.Duration
	report    func(SlowLink)

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// startLinkWatch starts the watch of c's links, when the config asks for
// one; Close stops it.
func (c *Comm) startLinkWatch(cfg Config) {
	mt, ok := c.t.(*meshTransport)
	if !ok || cfg.LinkCheck < 0 {
		return
	}
	w := &linkWatch{mesh: mt.mesh, peers: linkedPeers(cfg.Rank, cfg.WorldSize), every: cfg.LinkCheck,
		threshold: cfg.SlowLink, report: cfg.OnSlowLink}
	if w.every == 0 {
		w.every = DefaultLinkCheck
	}
	if w.threshold == 0 {
		w.threshold = DefaultSlowLink
	}
	log := c.log
	user := w.report
	w.report = func(s SlowLink) {
		if s.Err != nil {
			log.Warn("link does not answer probes", "peer", s.Peer, "addr", s.Addr, "after", s.RoundTrip, "err", s.Err)
		} else {
			log.Warn("slow link", "peer", s.Peer, "addr", s.Addr, "round_trip", s.RoundTrip, "threshold", s.Threshold)
		}
		if user != nil {
			user(s)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	c.watch = w
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run(ctx)
	}()
}

// close stops the watch and waits for it.
func (w *linkWatch) close() {
	if w == nil {
		return
	}
	w.stop()
	w.wg.Wait()
}

func (w *linkWatch) run(ctx context.Context) {
	slow := map[int]int{} // consecutive slow probes by peer
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.mesh.Done():
			return // a failed mesh names its culprit; nothing left to time
		case <-t.C:
		}
		for _, p := range w.peers {
			start := time.Now()
			_, err := w.mesh.probe(p)
			rt := time.Since(start)
			if ctx.Err() != nil || w.mesh.isFailed() {
				return
			}
			if err == nil && rt <= w.threshold {
				slow[p] = 0
				continue
			}
			if slow[p]++; slow[p] >= slowProbesToReport {
				w.report(SlowLink{Rank: w.mesh.cfg.Rank, Peer: p, Addr: w.mesh.Addr(p), RoundTrip: rt, Err: err, Threshold: w.threshold})
			}
		}
	}
}
