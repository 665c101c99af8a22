package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/rpc"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// A replacement for a dead server rejoins the ring at the dead server's
// index, so it takes back the same arcs and ranges:
//
//  1. It asks a live server for the job's state (JoinState): the ring
//     (where its index is dead), the tables' specs and the workers'
//     clocks, and declares the tables.
//  2. It asks for its place back (Rejoin). The coordinator (the lowest
//     live server) makes the next ring, with the index alive at the
//     replacement's address, and has every other live server adopt it:
//     each copies the replacement the rows it will hold (reReplicate),
//     holding pushes meanwhile. The replacement adopts the ring last
//     (Admit), so no call reaches it before its rows have.
//  3. Until every worker has sent it a clock itself, it takes the clocks
//     the others heard, so a clock sent while it joined is not missed.
//
// A coordinator that dies during step 2 leaves some servers on the next
// ring and some on the last, and some of the replacement's rows
// uncopied. The replacement asks the next server it knows; that one takes
// the dead coordinator out of the ring (as a worker's report would) and
// coordinates. Finding the replacement already in the ring at its
// address but not yet serving it, the new coordinator has every live
// server copy it its rows again (Refill) before it adopts the ring.

// Join makes this server, a replacement for the dead server of its index,
// rejoin the ring at addr, its own address. The server must be serving
// already: the others copy it its rows during the call. It asks the other
// servers of the ring it was made with, in turn, and again until ctx ends
// (a coordinator that died is taken out meanwhile), until one admits it.
func (s *Server) Join(ctx context.Context, addr string) error {
	s.joining.Store(true)
	ring := s.ring.Load()
	start := time.Now()
	backoff := joinBackoff
	for {
		var errs []error
		for i := range ring.Servers() {
			if i == s.cfg.Index {
				continue
			}
			err := s.joinThrough(ctx, ring, i, addr)
			if err == nil || !s.joining.Load() {
				// Admitted, perhaps by a call that failed here.
				s.rejoined(start)
				return nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		err := fmt.Errorf("ps %d: rejoin the ring at %s: %w", s.cfg.Index, addr, errors.Join(errs...))
		s.log.Warn("could not rejoin the ring yet", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxJoinBackoff)
	}
}

// joinBackoff and maxJoinBackoff space a replacement's rounds of asking
// the others to rejoin.
const (
	joinBackoff    = 100 * time.Millisecond
	maxJoinBackoff = 2 * time.Second
)

// joinThrough rejoins through server i of ring.
func (s *Server) joinThrough(ctx context.Context, ring *ps.Ring, i int, addr string) error {
	c, err := s.peer(ring, i)
	if err != nil {
		return err
	}
	st, err := c.JoinState(ctx, &pspb.JoinStateRequest{})
	if err != nil {
		return fmt.Errorf("server %d: job state: %w", i, err)
	}
	current, err := ps.RingFromInfo(st.Ring)
	if err != nil {
		return fmt.Errorf("server %d: job state: %w", i, err)
	}
	// In the ring at this address already: an earlier Rejoin made the ring
	// and did not finish; Rejoin again copies the rows.
	placed := !current.Dead(s.cfg.Index) && current.Servers()[s.cfg.Index] == addr
	if !placed && !current.Dead(s.cfg.Index) {
		// The servers have not noticed the death yet (no call has reached
		// the dead server since): report it, so they take it out.
		info, err := c.ReportDead(ctx, &pspb.ReportDeadRequest{Server: int32(s.cfg.Index), RingVersion: current.Version()})
		if err != nil {
			return fmt.Errorf("server %d: index %d is in the ring (version %d) at %s, and reporting it gone failed: %w",
				i, s.cfg.Index, current.Version(), current.Servers()[s.cfg.Index], err)
		}
		if current, err = ps.RingFromInfo(info); err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
		if !current.Dead(s.cfg.Index) {
			return fmt.Errorf("server %d: index %d is still in the ring (version %d) at %s", i, s.cfg.Index, current.Version(), current.Servers()[s.cfg.Index])
		}
	}
	s.mu.Lock()
	for _, spec := range st.Tables {
		if _, ok := s.tables[spec.Name]; !ok {
			s.tables[spec.Name] = newTable(spec)
		}
	}
	s.mu.Unlock()
	s.clocks.merge(st.Clocks)
	s.adoptMu.Lock()
	// Never a ring that has this server alive: it serves one only once its
	// rows are in (the coordinator's Admit).
	if !placed && current.Version() > s.ring.Load().Version() {
		s.ring.Store(current)
	}
	s.adoptMu.Unlock()
	if _, err := c.Rejoin(ctx, &pspb.RejoinRequest{Server: int32(s.cfg.Index), Addr: addr}); err != nil {
		return fmt.Errorf("server %d: rejoin: %w", i, err)
	}
	return nil
}

// rejoined says the server, admitted to the ring, rejoined it (start is
// when it began) and has it take the clocks it missed.
func (s *Server) rejoined(start time.Time) {
	keys, _, _, _ := s.totals()
	s.mu.RLock()
	tables := len(s.tables)
	s.mu.RUnlock()
	s.log.Info("rejoined the ring", "ring_version", s.ring.Load().Version(), "tables", tables, "rows", keys,
		"took", time.Since(start).Round(time.Millisecond))
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		s.catchUpClocks(s.life)
	}()
}

// clockCatchUp is how often a replacement takes the others' clocks until
// every worker has sent it its own.
const clockCatchUp = 50 * time.Millisecond

// catchUpClocks takes the clocks the other servers heard until every
// worker still in the job has sent this server its clock itself.
func (s *Server) catchUpClocks(ctx context.Context) {
	t := time.NewTicker(clockCatchUp)
	defer t.Stop()
	for !s.clocks.allHeard() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ring := s.ring.Load()
		for i := range ring.Servers() {
			if i == s.cfg.Index || ring.Dead(i) {
				continue
			}
			c, err := s.peer(ring, i)
			if err != nil {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, s.cfg.ProbeTimeout)
			st, err := c.JoinState(cctx, &pspb.JoinStateRequest{})
			cancel()
			if err == nil {
				s.clocks.merge(st.Clocks)
			}
		}
	}
}

// JoinState implements pspb.ParameterServerServer.
func (s *Server) JoinState(context.Context, *pspb.JoinStateRequest) (*pspb.JoinStateResponse, error) {
	s.mu.RLock()
	specs := make([]*pspb.TableSpec, 0, len(s.tables))
	for _, t := range s.tables {
		specs = append(specs, t.spec)
	}
	s.mu.RUnlock()
	slices.SortFunc(specs, func(a, b *pspb.TableSpec) int { return strings.Compare(a.Name, b.Name) })
	return &pspb.JoinStateResponse{Ring: s.ringInfo(s.ring.Load()), Tables: specs, Clocks: s.clocks.snapshot()}, nil
}

// Rejoin implements pspb.ParameterServerServer.
func (s *Server) Rejoin(ctx context.Context, req *pspb.RejoinRequest) (*pspb.RingInfo, error) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.joining.Load() {
		return nil, rpc.Errorf(errUnavailable, "server %d is rejoining the ring itself: it coordinates nothing yet", s.cfg.Index)
	}
	for {
		ring := s.ring.Load()
		i := int(req.Server)
		if i < 0 || i >= len(ring.Servers()) {
			return nil, rpc.Errorf(errBadRequest, "no server %d in a ring of %d", i, len(ring.Servers()))
		}
		placed := !ring.Dead(i)
		if placed && ring.Servers()[i] != req.Addr {
			return nil, rpc.Errorf(errWrongState, "server %d is in the ring (version %d) at %s: a replacement rejoins only for a dead server",
				i, ring.Version(), ring.Servers()[i])
		}
		coord := -1
		for j := range ring.Servers() {
			if j != i && !ring.Dead(j) {
				coord = j
				break
			}
		}
		if coord < 0 {
			return nil, rpc.Errorf(errUnavailable, "no live server left to coordinate server %d's rejoin", i)
		}
		if coord == s.cfg.Index {
			if s.catchUp(ctx, ring, []int{i}) {
				continue
			}
			if placed {
				return s.refillRejoined(ctx, ring, i, req.Addr)
			}
			return s.coordinateRejoin(ctx, ring, i, req.Addr)
		}
		c, err := s.peer(ring, coord)
		if err == nil {
			var info *pspb.RingInfo
			if info, err = c.Rejoin(ctx, req); err == nil {
				return info, nil
			}
		}
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || ctx.Err() != nil {
			return nil, err
		}
		// The coordinator died, perhaps in this very rejoin: take it out
		// (a live one is not) and ask the next.
		if _, rerr := s.reportDeadLocked(ctx, &pspb.ReportDeadRequest{Server: int32(coord), RingVersion: ring.Version()}); rerr != nil {
			return nil, fmt.Errorf("coordinator %d did not answer (%v), and taking it out failed: %w", coord, err, rerr)
		}
	}
}

// coordinateRejoin puts server i back in ring at addr: every live server
// adopts the next ring, copying the replacement its rows, and the
// replacement adopts it last.
func (s *Server) coordinateRejoin(ctx context.Context, ring *ps.Ring, i int, addr string) (*pspb.RingInfo, error) {
	next, err := ring.WithRejoined(ring.Version()+1, i, addr)
	if err != nil {
		return nil, rpc.Errorf(errBadRequest, "%s", err.Error())
	}
	info := s.ringInfo(next)
	s.log.Info("a replacement rejoins the ring", "server", i, "addr", addr, "ring_version", next.Version())
	// Every other live server first: they copy the replacement its rows.
	errs := s.onLive(ring, -1, s.adopting(ctx, info))
	if len(errs) > 0 {
		// Some rows may not have reached the replacement: it stays out of
		// service and asks again, and is copied them then (Refill).
		return nil, rpc.Errorf(errRetry, "ring version %d, with the replacement for server %d: %v", next.Version(), i, errors.Join(errs...))
	}
	return s.replacementAdopts(ctx, next, i)
}

// refillRejoined finishes the rejoin of server i, already alive in ring at
// addr (whose coordinator died before the replacement adopted it): every
// live server copies it its rows again, then it adopts the ring. A
// replacement that adopted it already (a retried call) is left as it is.
func (s *Server) refillRejoined(ctx context.Context, ring *ps.Ring, i int, addr string) (*pspb.RingInfo, error) {
	c, err := s.peer(ring, i)
	if err != nil {
		return nil, err
	}
	if got, err := c.GetRing(ctx, &pspb.GetRingRequest{}); err != nil {
		return nil, rpc.Errorf(errUnavailable, "the replacement for server %d at %s: %v", i, addr, err)
	} else if got.Version >= ring.Version() {
		return s.ringInfo(ring), nil // a retried call
	}
	s.log.Warn("a replacement's rejoin did not finish: copying it its rows again", "server", i, "addr", addr, "ring_version", ring.Version())
	// A server the dead coordinator never reached adopts the ring first.
	info := s.ringInfo(ring)
	req := &pspb.RefillRequest{Server: int32(i), RingVersion: ring.Version()}
	adopt := s.adopting(ctx, info)
	errs := s.onLive(ring, i, func(j int, c pspb.ParameterServerClient) error {
		if c == nil {
			_, err := s.Refill(ctx, req)
			return err
		}
		if err := adopt(j, c); err != nil {
			return err
		}
		_, err := c.Refill(ctx, req)
		return err
	})
	if len(errs) > 0 {
		// A server that could not copy its part: the replacement stays
		// out of service, and asks again.
		return nil, rpc.Errorf(errRetry, "copying the replacement for server %d its rows again: %v", i, errors.Join(errs...))
	}
	return s.replacementAdopts(ctx, ring, i)
}

// onLive calls call on every live server of ring but skip, side by side,
// with a client of it (nil for this server), and returns their errors.
func (s *Server) onLive(ring *ps.Ring, skip int, call func(j int, c pspb.ParameterServerClient) error) []error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for j := range ring.Servers() {
		if ring.Dead(j) || j == skip {
			continue
		}
		wg.Go(func() {
			var err error
			if j == s.cfg.Index {
				err = call(j, nil)
			} else if c, cerr := s.peer(ring, j); cerr != nil {
				err = cerr
			} else {
				err = call(j, c)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("server %d: %w", j, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// replacementAdopts has the replacement, server i, adopt ring, which has
// it alive, once the others copied it its rows.
func (s *Server) replacementAdopts(ctx context.Context, ring *ps.Ring, i int) (*pspb.RingInfo, error) {
	info := s.ringInfo(ring)
	c, err := s.peer(ring, i)
	if err == nil {
		_, err = c.Admit(ctx, info)
	}
	if err != nil {
		// Workers routed to it find it silent and report it dead again.
		return nil, rpc.Errorf(errUnavailable, "the replacement for server %d at %s did not adopt ring version %d: %v", i, ring.Servers()[i], ring.Version(), err)
	}
	return info, nil
}

// Refill implements pspb.ParameterServerServer.
func (s *Server) Refill(ctx context.Context, req *pspb.RefillRequest) (*pspb.RefillResponse, error) {
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	ring := s.ring.Load()
	i := int(req.Server)
	switch {
	case i < 0 || i >= len(ring.Servers()):
		return nil, rpc.Errorf(errBadRequest, "no server %d in a ring of %d", i, len(ring.Servers()))
	case ring.Version() != req.RingVersion:
		return nil, rpc.Errorf(errWrongState, "%s: refill for ring version %d, server %d holds version %d", errStaleRing, req.RingVersion, s.cfg.Index, ring.Version())
	case ring.Dead(i) || i == s.cfg.Index:
		return nil, rpc.Errorf(errBadRequest, "server %d is not a replacement in ring version %d", i, ring.Version())
	}
	// The rows this server sends a replacement rejoining: those of ring
	// without it that it holds with it.
	without, err := ring.WithDead(ring.Version(), i)
	if err != nil {
		return nil, rpc.Errorf(errBadRequest, "%s", err.Error())
	}
	start := time.Now()
	s.gate.Lock()
	defer s.gate.Unlock()
	rows, err := s.reReplicate(ctx, without, ring)
	s.log.Info("copied a replacement its rows again", "server", i, "ring_version", ring.Version(), "rows_copied", rows,
		"took", time.Since(start).Round(time.Millisecond), "err", err)
	if err != nil {
		return nil, rpc.Errorf(errUnavailable, "copy server %d its rows: %v", i, err)
	}
	return &pspb.RefillResponse{Rows: int64(rows)}, nil
}

// Admit implements pspb.ParameterServerServer.
func (s *Server) Admit(_ context.Context, info *pspb.RingInfo) (*pspb.AdoptRingResponse, error) {
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	next, err := ps.RingFromInfo(info)
	if err != nil {
		return nil, rpc.Errorf(errBadRequest, "%s", err.Error())
	}
	if next.Dead(s.cfg.Index) {
		return nil, rpc.Errorf(errBadRequest, "ring version %d has server %d dead: nothing to admit it to", next.Version(), s.cfg.Index)
	}
	if !s.joining.Load() {
		if next.Version() <= s.ring.Load().Version() {
			return &pspb.AdoptRingResponse{}, nil // a retried call
		}
		return nil, rpc.Errorf(errWrongState, "server %d is not rejoining: it adopts ring version %d as any other (AdoptRing)", s.cfg.Index, next.Version())
	}
	// Nothing to copy: the others copied this server its rows, and it
	// sends none.
	s.gate.Lock()
	s.ring.Store(next)
	s.joining.Store(false)
	s.gate.Unlock()
	s.log.Info("admitted to the ring", "ring_version", next.Version())
	return &pspb.AdoptRingResponse{}, nil
}
