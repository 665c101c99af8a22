package master

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// forwardedKey marks a call a follower forwarded to the leader, so a call
// is forwarded at most once.
const forwardedKey = "spindle-forwarded-by"

// service implements the Master gRPC API.
type service struct {
	pb.UnimplementedMasterServer
	m *Master
}

var _ pb.MasterServer = (*service)(nil)

// route decides where a write goes: ls is set when this master leads and
// handles it; otherwise fwd is the leader to forward it to, with the
// context to use.
func (s *service) route(ctx context.Context) (ls *leaderState, fwd pb.MasterClient, fctx context.Context, err error) {
	if ls := s.m.leader.Load(); ls != nil {
		return ls, nil, nil, nil
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(forwardedKey)) > 0 {
		return nil, nil, nil, fmt.Errorf("%w: %s was forwarded here by %s", apierr.ErrNotLeader, s.m.cfg.ID, md.Get(forwardedKey)[0])
	}
	c, err := s.m.leaderClient()
	if err != nil {
		return nil, nil, nil, err
	}
	if c == nil {
		return nil, nil, nil, fmt.Errorf("%w: leadership starting on %s", apierr.ErrNotLeader, s.m.cfg.ID)
	}
	return nil, c, metadata.AppendToOutgoingContext(ctx, forwardedKey, s.m.cfg.ID), nil
}

// forward runs a write on the leader: here, or through the leader's client.
func forward[Req, Resp any](s *service, ctx context.Context, req Req,
	local func(*leaderState, context.Context, Req) (Resp, error),
	remote func(pb.MasterClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var zero Resp
	ls, c, fctx, err := s.route(ctx)
	if err != nil {
		return zero, err
	}
	if ls != nil {
		resp, err := local(ls, ctx, req)
		return resp, err
	}
	return remote(c, fctx, req)
}

// RegisterWorker records a worker and reconciles what it runs.
func (s *service) RegisterWorker(ctx context.Context, req *pb.RegisterWorkerRequest) (*pb.RegisterWorkerResponse, error) {
	return forward(s, ctx, req, func(ls *leaderState, ctx context.Context, req *pb.RegisterWorkerRequest) (*pb.RegisterWorkerResponse, error) {
		switch {
		case req.GetId() == "" || req.GetAddr() == "" || req.GetIncarnation() == "":
			return nil, fmt.Errorf("%w: worker registration needs id, address and incarnation", apierr.ErrBadRequest)
		case req.GetCores() < 1 || req.GetMemoryMb() < 1 || req.GetGpus() < 0:
			return nil, fmt.Errorf("%w: worker %s offers %d cores, %d MiB, %d GPUs", apierr.ErrBadRequest,
				req.GetId(), req.GetCores(), req.GetMemoryMb(), req.GetGpus())
		}
		if err := ls.refuseDuplicate(ctx, req); err != nil {
			return nil, err
		}
		host := req.GetHost()
		if host == "" {
			host, _, _ = strings.Cut(req.GetAddr(), ":")
		}
		cmd := registerWorkerCmd{
			Worker: Worker{ID: req.GetId(), Addr: req.GetAddr(), Host: host, Cores: int(req.GetCores()),
				MemoryMB: req.GetMemoryMb(), GPUs: int(req.GetGpus()), Incarnation: req.GetIncarnation()},
			Reports: reportsOf(req.GetExecutors()),
			TimeMS:  nowMS(),
		}
		if _, err := ls.m.apply(cmdRegisterWorker, cmd); err != nil {
			return nil, err
		}
		ls.sawWorker(req.GetId())
		ls.logger.Info("worker registered", "worker", req.GetId(), "addr", req.GetAddr(), "cores", req.GetCores(),
			"memory_mb", req.GetMemoryMb(), "gpus", req.GetGpus(), "executors", len(req.GetExecutors()))
		ls.stopUnknown(req.GetId(), req.GetAddr(), req.GetExecutors())
		ls.sched.poke()
		return &pb.RegisterWorkerResponse{LeaderId: ls.m.cfg.ID}, nil
	}, pb.MasterClient.RegisterWorker)
}

func reportsOf(es []*pb.WorkerExecutor) []report {
	out := make([]report, 0, len(es))
	for _, e := range es {
		out = append(out, report{App: e.GetAppId(), ID: e.GetExecutorId(), Running: e.GetRunning(),
			ExitCode: int(e.GetExitCode()), Message: e.GetMessage()})
	}
	return out
}

// WorkerHeartbeat records liveness and executor exits.
func (s *service) WorkerHeartbeat(ctx context.Context, req *pb.WorkerHeartbeatRequest) (*pb.WorkerHeartbeatResponse, error) {
	return forward(s, ctx, req, func(ls *leaderState, ctx context.Context, req *pb.WorkerHeartbeatRequest) (*pb.WorkerHeartbeatResponse, error) {
		var known, changes bool
		var addr string
		var forget []string
		ls.m.fsm.read(func(st *State, _ uint64) {
			w, ok := st.Workers[req.GetId()]
			if !ok || !w.Alive || w.Incarnation != req.GetIncarnation() {
				return
			}
			known, addr = true, w.Addr
			for _, r := range req.GetExecutors() {
				e, ok := st.Executors[execKey(r.GetAppId(), r.GetExecutorId())]
				if !r.GetRunning() {
					forget = append(forget, execKey(r.GetAppId(), r.GetExecutorId()))
				}
				if !ok || e.Worker != req.GetId() || !e.Active() {
					continue
				}
				if !r.GetRunning() || e.State == pb.ExecutorState_EXECUTOR_STATE_PLACED {
					changes = true
				}
			}
		})
		if !known {
			return &pb.WorkerHeartbeatResponse{Reregister: true}, nil
		}
		ls.sawWorker(req.GetId())
		if changes {
			if _, err := ls.m.apply(cmdWorkerReport, workerReportCmd{ID: req.GetId(),
				Reports: reportsOf(req.GetExecutors()), TimeMS: nowMS()}); err != nil {
				return nil, err
			}
		}
		ls.stopUnknown(req.GetId(), addr, req.GetExecutors())
		return &pb.WorkerHeartbeatResponse{Forget: forget}, nil
	}, pb.MasterClient.WorkerHeartbeat)
}

// RegisterApp starts an application.
func (s *service) RegisterApp(ctx context.Context, req *pb.RegisterAppRequest) (*pb.RegisterAppResponse, error) {
	return forward(s, ctx, req, func(ls *leaderState, ctx context.Context, req *pb.RegisterAppRequest) (*pb.RegisterAppResponse, error) {
		name := req.GetName()
		if name == "" {
			name = "unnamed"
		}
		res, err := ls.m.apply(cmdRegisterApp, registerAppCmd{Name: name, DriverHost: req.GetDriverHost(),
			RequestID: req.GetRequestId(), TimeMS: nowMS()})
		if err != nil {
			return nil, err
		}
		id, _ := res.(string)
		ls.sawApp(id)
		ls.logger.Info("application registered", "app", id, "name", name, "driver_host", req.GetDriverHost())
		return &pb.RegisterAppResponse{AppId: id}, nil
	}, pb.MasterClient.RegisterApp)
}

// AppHeartbeat keeps an application alive.
func (s *service) AppHeartbeat(ctx context.Context, req *pb.AppHeartbeatRequest) (*pb.AppHeartbeatResponse, error) {
	return forward(s, ctx, req, func(ls *leaderState, ctx context.Context, req *pb.AppHeartbeatRequest) (*pb.AppHeartbeatResponse, error) {
		var state pb.AppState
		ls.m.fsm.read(func(st *State, _ uint64) {
			if a, ok := st.Apps[req.GetAppId()]; ok {
				state = a.State
			}
		})
		if state == pb.AppState_APP_STATE_UNSPECIFIED {
			return nil, fmt.Errorf("%w: %s", apierr.ErrUnknownApp, req.GetAppId())
		}
		ls.heardApp(req.GetAppId(), req.GetLocalizing())
		return &pb.AppHeartbeatResponse{State: state}, nil
	}, pb.MasterClient.AppHeartbeat)
}

// RequestExecutors places and launches a gang.
func (s *service) RequestExecutors(ctx context.Context, req *pb.RequestExecutorsRequest) (*pb.RequestExecutorsResponse, error) {
	return forward(s, ctx, req, (*leaderState).requestExecutors, pb.MasterClient.RequestExecutors)
}

// ReleaseExecutors stops executors and waits until they are gone.
func (s *service) ReleaseExecutors(ctx context.Context, req *pb.ReleaseExecutorsRequest) (*pb.ReleaseExecutorsResponse, error) {
	return forward(s, ctx, req, func(ls *leaderState, ctx context.Context, req *pb.ReleaseExecutorsRequest) (*pb.ReleaseExecutorsResponse, error) {
		reason := req.GetReason()
		if reason == "" {
			reason = "released by the driver"
		}
		if _, err := ls.m.apply(cmdStopRequest, stopRequestCmd{App: req.GetAppId(), IDs: req.GetExecutorIds(),
			Reason: reason, TimeMS: nowMS()}); err != nil {
			return nil, err
		}
		ls.poke()
		infos, err := ls.waitTerminal(ctx, req.GetAppId(), req.GetExecutorIds())
		if err != nil {
			return nil, err
		}
		return &pb.ReleaseExecutorsResponse{Executors: infos}, nil
	}, pb.MasterClient.ReleaseExecutors)
}

// waitTerminal waits until the named executors of app (all when ids is
// empty) have exited or are lost.
func (ls *leaderState) waitTerminal(ctx context.Context, app string, ids []string) ([]*pb.ExecutorInfo, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for {
		changed := ls.m.fsm.watch()
		var infos []*pb.ExecutorInfo
		done := true
		ls.m.fsm.read(func(st *State, _ uint64) {
			for _, e := range st.appExecutors(app) {
				if len(want) > 0 && !want[e.ID] {
					continue
				}
				if e.Active() {
					done = false
				}
				infos = append(infos, st.executorInfo(e))
			}
		})
		if done {
			return infos, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for executors of %s to stop: %w", app, ctx.Err())
		case <-ls.ctx.Done():
			return nil, fmt.Errorf("%w: leadership lost while stopping executors", apierr.ErrNotLeader)
		case <-ls.m.stopping:
			return nil, fmt.Errorf("%w: master shutting down", apierr.ErrStopped)
		}
	}
}

// FinishApp ends an application.
func (s *service) FinishApp(ctx context.Context, req *pb.FinishAppRequest) (*pb.FinishAppResponse, error) {
	return forward(s, ctx, req, func(ls *leaderState, ctx context.Context, req *pb.FinishAppRequest) (*pb.FinishAppResponse, error) {
		msg := req.GetMessage()
		if msg == "" {
			msg = "finished by the driver"
		}
		if _, err := ls.m.apply(cmdEndApp, endAppCmd{App: req.GetAppId(), State: pb.AppState_APP_STATE_FINISHED,
			Final: req.GetFinalStatus(), Message: msg, Retain: ls.m.cfg.RetainedApps, TimeMS: nowMS()}); err != nil {
			return nil, err
		}
		ls.poke()
		ls.logger.Info("application finished", "app", req.GetAppId())
		return &pb.FinishAppResponse{}, nil
	}, pb.MasterClient.FinishApp)
}

// KillApp ends an application on an admin's request.
func (s *service) KillApp(ctx context.Context, req *pb.KillAppRequest) (*pb.KillAppResponse, error) {
	return forward(s, ctx, req, func(ls *leaderState, ctx context.Context, req *pb.KillAppRequest) (*pb.KillAppResponse, error) {
		var id string
		var err error
		var ended *pb.AppInfo
		ls.m.fsm.read(func(st *State, _ uint64) {
			if id, err = resolveApp(st, req.GetApp()); err == nil && !st.Apps[id].Running() {
				ended = appInfo(st.Apps[id])
			}
		})
		if err != nil {
			return nil, err
		}
		if ended != nil {
			return nil, fmt.Errorf("%w: %s already ended: %s", apierr.ErrAppEnded, id, pb.DescribeEnd(ended))
		}
		msg := "killed by an admin (spindle kill)"
		if r := req.GetReason(); r != "" {
			msg += ": " + r
		}
		if _, err := ls.m.apply(cmdEndApp, endAppCmd{App: id, State: pb.AppState_APP_STATE_KILLED,
			Final: pb.FinalStatus_FINAL_STATUS_KILLED, Message: msg, Retain: ls.m.cfg.RetainedApps, TimeMS: nowMS()}); err != nil {
			return nil, err
		}
		ls.poke()
		ls.logger.Info("application killed", "app", id)
		resp := &pb.KillAppResponse{}
		ls.m.fsm.read(func(st *State, _ uint64) {
			if a, ok := st.Apps[id]; ok {
				resp.App = appInfo(a)
			}
		})
		return resp, nil
	}, pb.MasterClient.KillApp)
}

// resolveApp finds an application by id, or by the name of exactly one
// running application.
func resolveApp(st *State, app string) (string, error) {
	if _, ok := st.Apps[app]; ok {
		return app, nil
	}
	var ids []string
	var latest *App // the newest ended application of that name
	for _, a := range st.Apps {
		switch {
		case a.Name != app:
		case a.Running():
			ids = append(ids, a.ID)
		case latest == nil || a.SubmittedMS > latest.SubmittedMS:
			latest = a
		}
	}
	switch {
	case len(ids) == 0 && latest != nil:
		return latest.ID, nil
	case len(ids) == 0:
		return "", fmt.Errorf("%w: no application has the id or name %q", apierr.ErrUnknownApp, app)
	case len(ids) == 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%w: %q names %s; give an id", apierr.ErrAmbiguous, app, strings.Join(ids, ", "))
}

// MasterInfo describes this master.
func (s *service) MasterInfo(ctx context.Context, _ *pb.MasterInfoRequest) (*pb.MasterInfoResponse, error) {
	return s.m.info(), nil
}

func (m *Master) info() *pb.MasterInfoResponse {
	_, leader := m.raft.LeaderWithID()
	self := m.cfg.self()
	info := &pb.MasterInfoResponse{
		Id: m.cfg.ID, Addr: self.Addr, RaftAddr: self.RaftAddr,
		State: m.raft.State().String(), LeaderId: string(leader),
		Term: m.raft.CurrentTerm(), LastIndex: m.raft.LastIndex(),
		CommitIndex: m.raft.CommitIndex(), AppliedIndex: m.raft.AppliedIndex(),
	}
	if m.raft.State() != raft.Leader {
		if lc := m.raft.LastContact(); !lc.IsZero() {
			info.LastContactMs = time.Since(lc).Milliseconds()
		}
	}
	if ls := m.leader.Load(); ls != nil {
		info.QueuedGangs = int32(ls.sched.queued())
	}
	var snapIndex uint64
	if _, err := fmt.Sscan(m.raft.Stats()["last_snapshot_index"], &snapIndex); err == nil {
		info.LastSnapshotIndex = snapIndex
	}
	return info
}

// ClusterStatus returns this master's replica of the cluster state. A
// master just elected answers once it has taken up the leader's duties,
// its replica holding everything committed before its term: until then
// it may still be replaying its log (after a restart, from the start),
// and an answer served by "the leader" must not show states long gone.
func (s *service) ClusterStatus(ctx context.Context, _ *pb.ClusterStatusRequest) (*pb.ClusterStatusResponse, error) {
	m := s.m
	if err := m.awaitLeaderReplica(ctx); err != nil {
		return nil, err
	}
	resp := &pb.ClusterStatusResponse{ServedBy: m.info()}
	if f := m.raft.GetConfiguration(); f.Error() == nil {
		_, leader := m.raft.LeaderWithID()
		for _, srv := range f.Configuration().Servers {
			resp.Masters = append(resp.Masters, &pb.MasterPeer{
				Id: string(srv.ID), RaftAddr: string(srv.Address), Addr: m.peers[string(srv.ID)].Addr,
				Leader: srv.ID == leader, Voter: srv.Suffrage == raft.Voter,
			})
		}
	}
	m.fsm.read(func(st *State, _ uint64) {
		use := st.usageByWorker()
		for _, w := range st.sortedWorkers() {
			resp.Workers = append(resp.Workers, workerInfo(w, use[w.ID]))
		}
		var apps []*App
		for _, a := range st.Apps {
			apps = append(apps, a)
		}
		sortApps(apps)
		var waiting map[string]string
		var localizing map[string][]string
		if ls := m.leader.Load(); ls != nil {
			waiting, localizing = ls.sched.waiting(), ls.localizingApps()
		}
		for _, a := range apps {
			ai := appInfo(a)
			if need, ok := waiting[a.ID]; ok && a.Running() {
				ai.Waiting, ai.Need = true, need
			}
			if a.Running() {
				ai.Localizing = localizing[a.ID]
			}
			resp.Apps = append(resp.Apps, ai)
		}
		var es []*Executor
		for _, e := range st.Executors {
			es = append(es, e)
		}
		sortExecutors(es)
		for _, e := range es {
			resp.Executors = append(resp.Executors, st.executorInfo(e))
		}
	})
	return resp, nil
}

func sortApps(apps []*App) {
	for i := 1; i < len(apps); i++ {
		for j := i; j > 0 && (apps[j].SubmittedMS < apps[j-1].SubmittedMS ||
			apps[j].SubmittedMS == apps[j-1].SubmittedMS && apps[j].ID < apps[j-1].ID); j-- {
			apps[j], apps[j-1] = apps[j-1], apps[j]
		}
	}
}

// WatchApp streams an application's state after every change to it.
func (s *service) WatchApp(req *pb.WatchAppRequest, stream pb.Master_WatchAppServer) error {
	m := s.m
	ctx := stream.Context()
	var last []byte
	for {
		changed := m.fsm.watch()
		var snap *pb.AppSnapshot
		m.fsm.read(func(st *State, version uint64) {
			a, ok := st.Apps[req.GetAppId()]
			if !ok {
				return
			}
			snap = &pb.AppSnapshot{App: appInfo(a), Index: version}
			workers := map[string]bool{}
			for _, e := range st.appExecutors(a.ID) {
				snap.Executors = append(snap.Executors, st.executorInfo(e))
				workers[e.Worker] = true
			}
			use := st.usageByWorker()
			for _, w := range st.sortedWorkers() {
				if workers[w.ID] {
					snap.Workers = append(snap.Workers, workerInfo(w, use[w.ID]))
				}
			}
		})
		if snap == nil {
			return fmt.Errorf("%w: %s", apierr.ErrUnknownApp, req.GetAppId())
		}
		// Send only when the application changed, not on every change of
		// the cluster.
		probe := proto.Clone(snap).(*pb.AppSnapshot)
		probe.Index = 0
		for _, w := range probe.Workers {
			w.UsedCores, w.UsedMemoryMb, w.UsedGpus, w.Executors = 0, 0, 0, 0
		}
		cur, err := proto.MarshalOptions{Deterministic: true}.Marshal(probe)
		if err != nil {
			return err
		}
		if last == nil || !bytes.Equal(cur, last) {
			if err := stream.Send(snap); err != nil {
				return err
			}
			last = cur
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		case <-m.stopping:
			return fmt.Errorf("%w: master %s shutting down", apierr.ErrStopped, m.cfg.ID)
		}
	}
}

// catchUpStep is how often awaitLeaderReplica looks whether a new leader
// has caught up.
const catchUpStep = 10 * time.Millisecond

// awaitLeaderReplica returns once this master is not the Raft leader or
// has taken up the leader's duties (its barrier applied), or fails with
// ErrNotLeader, which sends a client to another master, when ctx ends or
// the master stops first.
func (m *Master) awaitLeaderReplica(ctx context.Context) error {
	for m.raft.State() == raft.Leader && !m.IsLeader() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s was elected and is still catching up: %v", apierr.ErrNotLeader, m.cfg.ID, ctx.Err())
		case <-m.stopping:
			return fmt.Errorf("%w: master shutting down", apierr.ErrStopped)
		case <-time.After(catchUpStep):
		}
	}
	return nil
}
