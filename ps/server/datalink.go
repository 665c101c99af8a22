package server

import (
	"fmt"
	"sync"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/rpc"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/rdma/ucx"
)

// dataLink is the server's UCX side: the listener its workers' pulls and
// pushes come to when the job's data link is UCX, or why there is none.
type dataLink struct {
	spec collective.LinkSpec
	mu   sync.Mutex
	l    *ucx.Listener
	why  string
	// stop closes when the server stops: the sessions' streams end.
	stop     chan struct{}
	stopOnce sync.Once
	served   uint64 // a closed listener's count

	namesMu sync.RWMutex
	names   map[string]string // table names, so a request's costs no allocation
}

// startDataLink starts the UCX listener when the job's link asks for
// one. With ucx:required a listener that cannot start fails the server;
// otherwise the server serves gRPC alone and says why to workers that
// offer UCX.
func (s *Server) startDataLink() error {
	d := &s.data
	switch {
	case d.spec.Name != ucx.Name:
		d.why = fmt.Sprintf("the server's data link is %s", d.spec)
		return nil
	case d.spec.Declined:
		d.why = "no usable RDMA device on the server"
		return nil
	}
	l, err := ucx.Listen(s.log, s.serveData)
	if err != nil {
		if d.spec.Required {
			return fmt.Errorf("ps %d: UCX required (%s=%s): %w", s.cfg.Index, collective.EnvLink, d.spec, err)
		}
		d.why = err.Error()
		s.log.Info("data link is grpc instead of "+ucx.Name, "reason", d.why)
		return nil
	}
	d.mu.Lock()
	d.l = l
	d.mu.Unlock()
	s.log.Info("data link is ucx", "ucx", ucxVersion())
	return nil
}

func ucxVersion() string {
	_, v := ucx.Available()
	return v
}

// stopDataLink ends every session and closes the listener, once the
// handlers under way have replied.
func (s *Server) stopDataLink() {
	d := &s.data
	d.stopOnce.Do(func() { close(d.stop) })
	d.mu.Lock()
	l := d.l
	d.l = nil
	d.mu.Unlock()
	if l != nil {
		l.Close()
		d.mu.Lock()
		d.served = l.Served()
		d.mu.Unlock()
	}
}

// CloseDataLink closes the data link at once, ending its sessions and
// failing their requests, as the end of the server's process would; Serve
// does it when it stops. Tests that cut a server off call it with closing
// its port.
func (s *Server) CloseDataLink() { s.stopDataLink() }

// DataLinkServed is the number of pulls and pushes the server took over
// its data link (0 without one).
func (s *Server) DataLinkServed() uint64 {
	s.data.mu.Lock()
	defer s.data.mu.Unlock()
	if s.data.l == nil {
		return s.data.served
	}
	return s.data.l.Served()
}

// DataLinkRefused is the number of data-link requests dropped because
// they carried no session's grant.
func (s *Server) DataLinkRefused() uint64 {
	s.data.mu.Lock()
	defer s.data.mu.Unlock()
	if s.data.l == nil {
		return 0
	}
	return s.data.l.Refused()
}

// DataLinkAddress is the server's UCX worker address, nil without one.
func (s *Server) DataLinkAddress() []byte {
	s.data.mu.Lock()
	defer s.data.mu.Unlock()
	if s.data.l == nil {
		return nil
	}
	return s.data.l.Address()
}

// OpenDataLink implements pspb.ParameterServerServer. The connection it
// comes on proved the job's peer token (peercred), so the grant it
// answers with reaches only the job's workers; the session ends with the
// stream.
func (s *Server) OpenDataLink(offer *pspb.DataLinkOffer, stream grpc.ServerStreamingServer[pspb.DataLinkAnswer]) error {
	if err := s.worker(offer.Worker); err != nil {
		return err
	}
	d := &s.data
	d.mu.Lock()
	l, why := d.l, d.why
	d.mu.Unlock()
	if offer.Kind != ucx.Name {
		return stream.Send(&pspb.DataLinkAnswer{Declined: fmt.Sprintf("the server offers %s, not %q", ucx.Name, offer.Kind)})
	}
	if l == nil {
		return stream.Send(&pspb.DataLinkAnswer{Declined: why})
	}
	sess, err := l.Accept(offer.Address)
	if err != nil {
		return stream.Send(&pspb.DataLinkAnswer{Declined: "cannot reach the worker's UCX address: " + err.Error()})
	}
	defer sess.Close()
	if err := stream.Send(&pspb.DataLinkAnswer{Kind: ucx.Name, Address: l.Address(), Grant: sess.Grant().Bytes()}); err != nil {
		return err
	}
	s.log.Debug("data link session opened", "worker", offer.Worker)
	select {
	case <-stream.Context().Done():
		return nil
	case <-d.stop:
		return rpc.Errorf(errUnavailable, "ps %d is stopping", s.cfg.Index)
	case <-sess.Context().Done():
		return nil
	}
}

// tableName returns name as a string, from a cache: a request's table
// name costs no allocation.
func (d *dataLink) tableName(b []byte) string {
	d.namesMu.RLock()
	name, ok := d.names[string(b)]
	d.namesMu.RUnlock()
	if ok {
		return name
	}
	name = string(b)
	d.namesMu.Lock()
	if len(d.names) < 1024 {
		d.names[name] = name
	}
	d.namesMu.Unlock()
	return name
}

// serveData serves one pull or push that came over the data link with
// the same code as the gRPC calls: the same checks, stale-ring errors,
// consistency waits, duplicate checks and replication. A pull's rows are
// made straight in the reply's registered buffer.
func (s *Server) serveData(r *ucx.Request) {
	ctx := r.Session.Context()
	var payload []byte
	var dup bool
	err := func() error {
		h, name, err := ps.DecodeDataHead(r.Head)
		if err != nil {
			return rpc.Errorf(errBadRequest, "%s", err.Error())
		}
		if uint64(len(r.Body)) < 8*uint64(h.Keys) {
			return rpc.Errorf(errBadRequest, "a body of %d bytes for %d keys", len(r.Body), h.Keys)
		}
		keys, rest := r.Body[:8*h.Keys], r.Body[8*h.Keys:]
		table := s.data.tableName(name)
		switch h.Op {
		case ps.OpPull:
			req := pspb.PullRequest{Table: table, Keys: keys, RingVersion: h.RingVersion, Worker: h.Worker, Clock: h.Clock}
			out, err := s.pull(ctx, &req, func(n int) []float32 {
				b := r.Buffer(4 * n)
				return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
			})
			if err == nil {
				payload = ps.FloatBytes(out)
			}
			return err
		case ps.OpPush:
			req := pspb.PushRequest{Table: table, Keys: keys, Grads: rest, RingVersion: h.RingVersion,
				Worker: h.Worker, Seq: h.Seq, Origin: h.Origin}
			resp, err := s.Push(ctx, &req)
			if err == nil {
				dup = resp.Duplicate
			}
			return err
		}
		return rpc.Errorf(errBadRequest, "data link operation %d", h.Op)
	}()
	var head [256]byte
	st := ps.DataStatus{Duplicate: dup}
	if err != nil {
		payload = nil
		e := status.Convert(errorCodes.Map(err))
		st.Code, st.Message = uint32(e.Code()), e.Message()
	}
	if err := r.Reply(ps.AppendDataStatus(head[:0], st), payload); err != nil {
		s.log.Debug("data link reply not sent", "err", err)
	}
}
