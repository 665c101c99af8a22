package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/rpc"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// Replication. Each sparse row lives on its owner and on the next
// Replicas live servers of the ring. The owner (primary) forwards every
// push to the backups and applies it itself only once they have, so a
// push acknowledged to a worker is on every replica. When a server stops
// answering, whoever noticed (a client, or a primary whose backup is
// gone) reports it to the ring's coordinator, the lowest live server,
// which checks that it is gone and has every live server adopt the next
// version of the ring without it. Its keys fall to their first backup,
// which has them; every server then copies the rows it now owns to the
// backups that lack them, holding pushes until they have them. A worker
// retries a push that got no answer with the same sequence number, and a
// server that has applied it (as primary or backup) says so instead of
// applying it twice.

// pushID names one part of one push of one worker across retries and
// failovers: the worker's sequence number, the server the part first went
// to, and a hash of its keys. A push's parts share the first two; the
// keys tell a dead primary's forward to one backup from its forward to
// another, each of which may now own its keys.
type pushID struct {
	worker int32
	seq    uint64
	origin int32
	keys   uint64
}

func idOf(req *pspb.PushRequest) pushID {
	return pushID{worker: req.Worker, seq: req.Seq, origin: req.Origin, keys: xxh3.Hash(req.Keys)}
}

// dedupe remembers the most recent pushes applied, and the ones being
// applied: a retry that arrives while an earlier attempt is still under
// way (a dead primary's last forward, say) is told to retry rather than
// applying the push a second time.
type dedupe struct {
	mu      sync.Mutex
	entries map[pushID]*applying
	order   []pushID // applied ones, a ring buffer, oldest at next
	next    int
}

// applying is one push being applied or applied.
type applying struct {
	done chan struct{}
	ok   bool
}

// dedupeWindow is how many pushes a server remembers: far more than the
// pushes in flight when a server dies.
const dedupeWindow = 1 << 16

func newDedupe() *dedupe {
	return &dedupe{entries: make(map[pushID]*applying, dedupeWindow), order: make([]pushID, 0, dedupeWindow)}
}

// errInFlight says a push is being applied by another attempt: the
// caller retries (a later attempt finds it applied, or takes it over if
// that attempt failed). Never waiting here keeps servers that forward to
// each other from waiting in a circle.
var errInFlight = rpc.Errorf(errRetry, "push in flight: another attempt of it is being applied; retry")

// begin claims push id. It returns false when the push was applied
// already, errInFlight while another attempt applies it, and true when
// the caller now applies it and must call end.
func (d *dedupe) begin(id pushID) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.entries[id]
	switch {
	case !ok:
		d.entries[id] = &applying{done: make(chan struct{})}
		return true, nil
	case e.ok:
		return false, nil
	}
	return false, errInFlight
}

// end releases a claim: applied, the push is remembered; failed, it is
// forgotten, so that a retry applies it.
func (d *dedupe) end(id pushID, applied bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.entries[id]
	if e == nil {
		return
	}
	e.ok = applied
	close(e.done)
	if !applied {
		delete(d.entries, id)
		return
	}
	if len(d.order) < dedupeWindow {
		d.order = append(d.order, id)
	} else {
		delete(d.entries, d.order[d.next])
		d.order[d.next] = id
		d.next = (d.next + 1) % dedupeWindow
	}
}

// peer returns a client of server i.
func (s *Server) peer(ring *ps.Ring, i int) (pspb.ParameterServerClient, error) {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	addr := ring.Servers()[i]
	if c, ok := s.peers[addr]; ok {
		return pspb.NewParameterServerClient(c), nil
	}
	if s.cfg.PeerCreds == nil {
		return nil, fmt.Errorf("ps %d: no credentials to call server %d", s.cfg.Index, i)
	}
	c, err := rpc.NewClient(addr, rpc.ClientConfig{Options: []grpc.DialOption{grpc.WithTransportCredentials(s.cfg.PeerCreds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))}})
	if err != nil {
		return nil, err
	}
	s.peers[addr] = c
	return pspb.NewParameterServerClient(c), nil
}

func (s *Server) closePeers() {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	for i, c := range s.peers {
		c.Close()
		delete(s.peers, i)
	}
}

// replicate forwards a push to the backups of its keys and waits for all.
// It returns the backup that failed, if one did.
//
// A retry of a push whose replication failed (one backup died) sends each
// backup again exactly the keys an earlier attempt sent it, as a sub-part
// of its own, so that a backup that applied them finds the same push (its
// duplicate check goes by the keys) rather than applying them again
// inside a larger sub-part; keys new to a backup (those the dead one
// backed up) go in a sub-part of their own.
func (s *Server) replicate(ctx context.Context, ring *ps.Ring, req *pspb.PushRequest, id pushID, keys []uint64, grads []float32, t *table) (int, error) {
	dim := t.dim
	subs := map[int]*subPart{}
	reps := make([]int, 0, s.cfg.Replicas+1)
	for j, k := range keys {
		reps = ring.Holders(reps[:0], k, t.spec.Rows, s.cfg.Replicas)
		for _, b := range reps[1:] {
			sb := subs[b]
			if sb == nil {
				sb = &subPart{backup: b}
				subs[b] = sb
			}
			sb.keys = append(sb.keys, k)
			sb.grads = append(sb.grads, grads[j*dim:(j+1)*dim]...)
		}
	}
	var prev map[int][][]uint64
	if req.Seq != 0 {
		prev = s.sent.take(id)
	}
	var parts, fresh []*subPart
	for _, sb := range subs {
		rest := sb
		for _, old := range prev[sb.backup] {
			if in, out, ok := rest.carve(old, dim); ok {
				parts = append(parts, in)
				rest = out
			}
		}
		if len(rest.keys) > 0 {
			parts = append(parts, rest)
			fresh = append(fresh, rest)
		}
	}
	var mu sync.Mutex
	failed := -1
	g, gctx := errgroup.WithContext(ctx)
	for _, sb := range parts {
		g.Go(func() error {
			c, err := s.peer(ring, sb.backup)
			if err == nil {
				_, err = c.Replicate(gctx, &pspb.PushRequest{Table: req.Table, Keys: ps.KeyBytes(sb.keys), Grads: ps.FloatBytes(sb.grads),
					RingVersion: ring.Version(), Worker: req.Worker, Seq: req.Seq, Origin: req.Origin})
			}
			if err != nil {
				if st, _ := status.FromError(err); st.Code() == codes.Unavailable {
					mu.Lock()
					failed = sb.backup
					mu.Unlock()
				}
				return fmt.Errorf("replicate to server %d: %w", sb.backup, err)
			}
			return nil
		})
	}
	err := g.Wait()
	if err != nil && req.Seq != 0 {
		// Whatever reached a backup is remembered, applied or not: the
		// retry sends it again alike.
		for b, lists := range prev {
			for _, l := range lists {
				s.sent.add(id, b, l)
			}
		}
		for _, sb := range fresh {
			s.sent.add(id, sb.backup, sb.keys)
		}
	}
	if err != nil && failed < 0 {
		// A backup on another ring (it is adopting one): the client
		// refreshes and retries.
		return -1, rpc.Errorf(errWrongState, "%s: %v", errStaleRing, err)
	}
	return failed, err
}

// subPart is the keys of a push, and their gradients, forwarded to one
// backup in one call.
type subPart struct {
	backup int
	keys   []uint64
	grads  []float32
}

// carve takes the keys of old out of p, in p's order (which is old's: both
// come from the same part), when p holds every one of them.
func (p *subPart) carve(old []uint64, dim int) (in, out *subPart, ok bool) {
	want := make(map[uint64]int, len(old))
	for _, k := range old {
		want[k]++
	}
	in, out = &subPart{backup: p.backup}, &subPart{backup: p.backup}
	for j, k := range p.keys {
		dst := out
		if want[k] > 0 {
			want[k]--
			dst = in
		}
		dst.keys = append(dst.keys, k)
		dst.grads = append(dst.grads, p.grads[j*dim:(j+1)*dim]...)
	}
	if len(in.keys) != len(old) {
		return nil, p, false
	}
	return in, out, true
}

// sentParts remembers, for the pushes whose replication failed, the keys
// each backup was sent, until their retry comes (or the window passes).
type sentParts struct {
	mu    sync.Mutex
	byID  map[pushID]map[int][][]uint64
	order []pushID
}

// sentWindow bounds how many failed pushes are remembered: far more than
// are in flight when a server dies.
const sentWindow = 4096

func newSentParts() *sentParts { return &sentParts{byID: map[pushID]map[int][][]uint64{}} }

// take returns and forgets what id's earlier attempts sent, by backup.
func (p *sentParts) take(id pushID) map[int][][]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.byID[id]
	delete(p.byID, id)
	return m
}

// add remembers that keys went to backup b for id.
func (p *sentParts) add(id pushID, b int, keys []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.byID[id]
	if m == nil {
		m = map[int][][]uint64{}
		p.byID[id] = m
		p.order = append(p.order, id)
		if len(p.order) > sentWindow {
			delete(p.byID, p.order[0])
			p.order = p.order[1:]
		}
	}
	m[b] = append(m[b], keys)
}

// Replicate implements pspb.ParameterServerServer: a primary's push,
// applied to this backup's copy of the rows.
func (s *Server) Replicate(_ context.Context, req *pspb.PushRequest) (*pspb.PushResponse, error) {
	if err := s.worker(req.Worker); err != nil {
		return nil, err
	}
	if v := s.ring.Load().Version(); req.RingVersion != v {
		return nil, rpc.Errorf(errWrongState, "%s: primary ring version %d, backup %d holds version %d", errStaleRing, req.RingVersion, s.cfg.Index, v)
	}
	keys, grads, err := decodePush(req)
	if err != nil {
		return nil, err
	}
	t, err := s.table(req.Table)
	if err != nil {
		return nil, err
	}
	if len(grads) != len(keys)*t.dim {
		return nil, rpc.Errorf(errBadRequest, "table %s has dim %d: %d keys need %d values, got %d", req.Table, t.dim, len(keys), len(keys)*t.dim, len(grads))
	}
	id := idOf(req)
	if req.Seq != 0 {
		fresh, err := s.applied.begin(id)
		if err != nil {
			return nil, err
		}
		if !fresh {
			return &pspb.PushResponse{Duplicate: true}, nil
		}
	}
	err = t.pushAs(keys, grads, &s.budget, false)
	if req.Seq != 0 {
		s.applied.end(id, err == nil)
	}
	if err != nil {
		return nil, err
	}
	return &pspb.PushResponse{}, nil
}

func (s *Server) table(name string) (*table, error) {
	s.mu.RLock()
	t, ok := s.tables[name]
	s.mu.RUnlock()
	if !ok {
		return nil, rpc.Errorf(errNotFound, "ps %d: no table %q: declare it first", s.cfg.Index, name)
	}
	return t, nil
}

// Install implements pspb.ParameterServerServer: whole rows from their
// new primary.
func (s *Server) Install(_ context.Context, req *pspb.InstallRequest) (*pspb.InstallResponse, error) {
	t, err := s.table(req.Table)
	if err != nil {
		return nil, err
	}
	keys, err := ps.BytesKeys(req.Keys)
	if err != nil {
		return nil, rpc.Errorf(errBadRequest, "install into %s: %v", req.Table, err)
	}
	rows, err := ps.BytesFloats(req.Rows)
	if err != nil || len(rows) != len(keys)*t.stride || len(req.Steps) != len(keys)*4 {
		return nil, rpc.Errorf(errBadRequest, "install into %s: %d keys with %d values and %d step bytes, want %d and %d",
			req.Table, len(keys), len(rows), len(req.Steps), len(keys)*t.stride, len(keys)*4)
	}
	rowsAt, err := t.locate(keys, groupByShard(keys), &s.budget)
	if err != nil {
		return nil, err
	}
	for j, k := range keys {
		sh := &t.shards[shardOf(k)]
		sh.mu.Lock()
		copy(t.rowAt(sh, rowsAt[j]), rows[j*t.stride:(j+1)*t.stride])
		sh.steps[rowsAt[j]] = int32(binary.LittleEndian.Uint32(req.Steps[j*4:]))
		sh.mu.Unlock()
	}
	return &pspb.InstallResponse{}, nil
}

func (s *Server) ringInfo(r *ps.Ring) *pspb.RingInfo {
	info := &pspb.RingInfo{Version: r.Version(), Servers: r.Servers(), VirtualNodes: uint32(r.VirtualNodes()), Replicas: uint32(s.cfg.Replicas)}
	for _, d := range r.DeadServers() {
		info.Dead = append(info.Dead, int32(d))
	}
	return info
}

// takeOut reports server down as gone, from this server.
func (s *Server) takeOut(ctx context.Context, down int) {
	if _, err := s.ReportDead(ctx, &pspb.ReportDeadRequest{Server: int32(down), RingVersion: s.ring.Load().Version()}); err != nil {
		s.log.Warn("could not take a silent server out of the ring", "server", down, "err", err)
	}
}

// ReportDead implements pspb.ParameterServerServer.
func (s *Server) ReportDead(ctx context.Context, req *pspb.ReportDeadRequest) (*pspb.RingInfo, error) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	return s.reportDeadLocked(ctx, req)
}

// reportDeadLocked is ReportDead with viewMu held.
func (s *Server) reportDeadLocked(ctx context.Context, req *pspb.ReportDeadRequest) (*pspb.RingInfo, error) {
	if s.joining.Load() {
		return nil, rpc.Errorf(errUnavailable, "server %d is rejoining the ring: it coordinates nothing yet", s.cfg.Index)
	}
	suspects := []int{int(req.Server)}
	for {
		ring := s.ring.Load()
		if n := len(ring.Servers()); int(req.Server) < 0 || int(req.Server) >= n {
			return nil, rpc.Errorf(errBadRequest, "no server %d in a ring of %d", req.Server, n)
		}
		if ring.Dead(int(req.Server)) {
			return s.ringInfo(ring), nil
		}
		coord := -1
		for i := range ring.Servers() {
			if !ring.Dead(i) && !slices.Contains(suspects, i) {
				coord = i
				break
			}
		}
		if coord < 0 {
			return nil, rpc.Errorf(errUnavailable, "no live server left to coordinate")
		}
		if coord == s.cfg.Index {
			if s.catchUp(ctx, ring, suspects) {
				continue
			}
			return s.coordinate(ctx, ring, suspects)
		}
		c, err := s.peer(ring, coord)
		if err == nil {
			var info *pspb.RingInfo
			info, err = c.ReportDead(ctx, req)
			if err == nil {
				return info, nil
			}
		}
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable {
			return nil, err
		}
		// The coordinator is gone too: the next live server coordinates,
		// and checks both.
		suspects = append(suspects, coord)
	}
}

// coordinate takes out of the ring those of suspects that do not answer,
// and has every live server adopt the new ring.
func (s *Server) coordinate(ctx context.Context, ring *ps.Ring, suspects []int) (*pspb.RingInfo, error) {
	var gone []int
	for _, x := range suspects {
		c, err := net.DialTimeout("tcp", ring.Servers()[x], s.cfg.ProbeTimeout)
		if err == nil {
			c.Close()
			continue
		}
		gone = append(gone, x)
	}
	if len(gone) == 0 {
		return nil, rpc.Errorf(errRetry, "server %d answers: not taken out of the ring", suspects[0])
	}
	next, err := ring.WithDead(ring.Version()+1, gone...)
	if err != nil {
		return nil, rpc.Errorf(errUnavailable, "%s", err.Error())
	}
	info := s.ringInfo(next)
	s.log.Warn("servers taken out of the ring: their keys move to their backups", "servers", gone, "ring_version", next.Version(), "live", next.Live())
	for _, err := range s.onLive(next, -1, s.adopting(ctx, info)) {
		s.log.Warn("a server did not adopt the new ring", "ring_version", next.Version(), "err", err)
	}
	return info, nil
}

// adopting is onLive's call that has each server adopt info, this one
// directly.
func (s *Server) adopting(ctx context.Context, info *pspb.RingInfo) func(int, pspb.ParameterServerClient) error {
	return func(_ int, c pspb.ParameterServerClient) error {
		var err error
		if c == nil {
			_, err = s.AdoptRing(ctx, info)
		} else {
			_, err = c.AdoptRing(ctx, info)
		}
		return err
	}
}

// catchUp moves this server, about to coordinate a change of ring, to the
// newest ring a live server of ring (but skip) holds, when that is newer
// than its own: a coordinator that died while the others adopted its ring
// left some on it. It says whether the server's ring changed.
func (s *Server) catchUp(ctx context.Context, ring *ps.Ring, skip []int) bool {
	var newest *pspb.RingInfo
	var mu sync.Mutex
	s.onLive(ring, s.cfg.Index, func(j int, c pspb.ParameterServerClient) error {
		if slices.Contains(skip, j) {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.ProbeTimeout)
		defer cancel()
		info, err := c.GetRing(cctx, &pspb.GetRingRequest{})
		if err != nil {
			return err
		}
		mu.Lock()
		if info.Version > ring.Version() && (newest == nil || info.Version > newest.Version) {
			newest = info
		}
		mu.Unlock()
		return nil
	})
	if newest == nil {
		return false
	}
	s.log.Info("catching up with a newer ring before coordinating", "ring_version", ring.Version(), "newest", newest.Version)
	if _, err := s.AdoptRing(ctx, newest); err != nil {
		s.log.Warn("could not catch up with a newer ring", "ring_version", newest.Version, "err", err)
	}
	return s.ring.Load().Version() > ring.Version()
}

// AdoptRing implements pspb.ParameterServerServer.
func (s *Server) AdoptRing(ctx context.Context, info *pspb.RingInfo) (*pspb.AdoptRingResponse, error) {
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	old := s.ring.Load()
	if info.Version <= old.Version() {
		return &pspb.AdoptRingResponse{}, nil
	}
	next, err := ps.RingFromInfo(info)
	if err != nil {
		return nil, rpc.Errorf(errBadRequest, "%s", err.Error())
	}
	if s.joining.Load() && !next.Dead(s.cfg.Index) {
		return nil, rpc.Errorf(errWrongState, "server %d is rejoining: it serves ring version %d once its rows are in (Admit)", s.cfg.Index, next.Version())
	}
	start := time.Now()
	s.gate.Lock()
	defer s.gate.Unlock()
	s.ring.Store(next)
	rows, err := s.reReplicate(ctx, old, next)
	s.log.Info("adopted ring", "ring_version", next.Version(), "dead", next.DeadServers(), "rows_copied", rows,
		"took", time.Since(start).Round(time.Millisecond), "err", err)
	return &pspb.AdoptRingResponse{}, nil
}

// reReplicate copies rows to the servers that hold them on next but did
// not on old. Each row is sent by one server: its owner on old when that
// one is still in the ring (a replacement's rows come from the servers
// that stood in for it), else its owner on next (a dead server's rows,
// from the backup that took them over).
func (s *Server) reReplicate(ctx context.Context, old, next *ps.Ring) (int, error) {
	if s.cfg.Replicas == 0 && old.Live() >= next.Live() {
		return 0, nil // no backups to make; no replacement to fill
	}
	s.mu.RLock()
	tables := make([]*table, 0, len(s.tables))
	for _, t := range s.tables {
		tables = append(tables, t)
	}
	s.mu.RUnlock()
	copied := 0
	var errs []error
	for _, t := range tables {
		type batch struct {
			keys  []uint64
			rows  []float32
			steps []byte
		}
		out := map[int]*batch{}
		var nr, or []int
		for i := range t.shards {
			sc := t.shards[i].snapshot()
			for j, k := range sc.keys {
				or = old.Holders(or[:0], k, t.spec.Rows, s.cfg.Replicas)
				nr = next.Holders(nr[:0], k, t.spec.Rows, s.cfg.Replicas)
				sender := or[0]
				if next.Dead(sender) {
					sender = nr[0]
				}
				if sender != s.cfg.Index {
					continue
				}
				for _, b := range nr {
					if slices.Contains(or, b) {
						continue
					}
					bt := out[b]
					if bt == nil {
						bt = &batch{}
						out[b] = bt
					}
					bt.keys = append(bt.keys, k)
					bt.rows = append(bt.rows, sc.data[j*t.stride:(j+1)*t.stride]...)
					bt.steps = binary.LittleEndian.AppendUint32(bt.steps, uint32(sc.steps[j]))
				}
			}
		}
		for b, bt := range out {
			c, err := s.peer(next, b)
			const chunk = 1 << 16
			for from := 0; err == nil && from < len(bt.keys); from += chunk {
				to := min(from+chunk, len(bt.keys))
				_, err = c.Install(ctx, &pspb.InstallRequest{Table: t.spec.Name, Keys: ps.KeyBytes(bt.keys[from:to]),
					Rows: ps.FloatBytes(bt.rows[from*t.stride : to*t.stride]), Steps: bt.steps[from*4 : to*4]})
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("copy table %s to server %d: %w", t.spec.Name, b, err))
				continue
			}
			copied += len(bt.keys)
		}
	}
	if len(errs) > 0 {
		return copied, fmt.Errorf("%v", errs)
	}
	return copied, nil
}
