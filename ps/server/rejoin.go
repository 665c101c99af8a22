package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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
//     holding pushes meanwhile. The replacement adopts the ring last, so
//     no call reaches it before its rows have.
//  3. Until every worker has sent it a clock itself, it takes the clocks
//     the others heard, so a clock sent while it joined is not missed.

// Join makes this server, a replacement for the dead server of its index,
// rejoin the ring at addr, its own address. The server must be serving
// already: the others copy it its rows during the call. It asks the other
// servers of the ring it was made with, in turn, until one answers.
func (s *Server) Join(ctx context.Context, addr string) error {
	ring := s.ring.Load()
	var errs []error
	for i := range ring.Servers() {
		if i == s.cfg.Index {
			continue
		}
		err := s.joinThrough(ctx, ring, i, addr)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("ps %d: rejoin the ring at %s: %w", s.cfg.Index, addr, errors.Join(errs...))
}

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
	if !current.Dead(s.cfg.Index) {
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
	if current.Version() > s.ring.Load().Version() {
		s.ring.Store(current)
	}
	s.adoptMu.Unlock()
	start := time.Now()
	info, err := c.Rejoin(ctx, &pspb.RejoinRequest{Server: int32(s.cfg.Index), Addr: addr})
	if err != nil {
		return fmt.Errorf("server %d: rejoin: %w", i, err)
	}
	keys, _, _, _ := s.totals()
	s.log.Info("rejoined the ring", "ring_version", info.Version, "tables", len(st.Tables), "rows", keys,
		"took", time.Since(start).Round(time.Millisecond))
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		s.catchUpClocks(s.life)
	}()
	return nil
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
	ring := s.ring.Load()
	i := int(req.Server)
	if i < 0 || i >= len(ring.Servers()) {
		return nil, rpc.Errorf(errBadRequest, "no server %d in a ring of %d", i, len(ring.Servers()))
	}
	if !ring.Dead(i) {
		if ring.Servers()[i] == req.Addr {
			return s.ringInfo(ring), nil // a retried call
		}
		return nil, rpc.Errorf(errWrongState, "server %d is in the ring (version %d) at %s: a replacement rejoins only for a dead server",
			i, ring.Version(), ring.Servers()[i])
	}
	coord := -1
	for j := range ring.Servers() {
		if !ring.Dead(j) {
			coord = j
			break
		}
	}
	if coord != s.cfg.Index {
		c, err := s.peer(ring, coord)
		if err != nil {
			return nil, err
		}
		return c.Rejoin(ctx, req)
	}
	next, err := ring.WithRejoined(ring.Version()+1, i, req.Addr)
	if err != nil {
		return nil, rpc.Errorf(errBadRequest, "%s", err.Error())
	}
	info := s.ringInfo(next)
	s.log.Info("a replacement rejoins the ring", "server", i, "addr", req.Addr, "ring_version", next.Version())
	// Every other live server first: they copy the replacement its rows.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for j := range ring.Servers() {
		if ring.Dead(j) {
			continue
		}
		wg.Go(func() {
			var err error
			if j == s.cfg.Index {
				_, err = s.AdoptRing(ctx, info)
			} else if c, cerr := s.peer(ring, j); cerr != nil {
				err = cerr
			} else {
				_, err = c.AdoptRing(ctx, info)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("server %d: %w", j, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		s.log.Warn("a server did not adopt the ring with the replacement", "ring_version", next.Version(), "err", err)
	}
	c, err := s.peer(next, i)
	if err == nil {
		_, err = c.AdoptRing(ctx, info)
	}
	if err != nil {
		// Workers routed to it find it silent and report it dead again.
		return nil, rpc.Errorf(errUnavailable, "the replacement for server %d at %s did not adopt ring version %d: %v", i, req.Addr, next.Version(), err)
	}
	return info, nil
}
