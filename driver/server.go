package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
)

// taskBuilder returns the task JSON for a rank.
type taskBuilder func(rank int) (*driverpb.Task, error)

// controlServer implements the driver side of the control plane.
type controlServer struct {
	driverpb.UnimplementedControlServer
	roster *roster
	tasks  taskBuilder
	// replacementTask builds the task of a worker that replaces a lost
	// one: it resumes from the newest complete checkpoint.
	replacementTask func(ctx context.Context, rank, replacement int) (*driverpb.Task, error)
	// newcomerTask builds the task of a newcomer that grows the running
	// gang in place.
	newcomerTask func(rank int) (*driverpb.Task, error)
	// boundaryNewcomer, when set, builds a newcomer's task in a job with
	// input: it waits for the epoch's end the newcomer joins at.
	boundaryNewcomer func(ctx context.Context, m *member) (*driverpb.Task, error)
	stop             <-chan struct{} // closed when the driver shuts down
	logger           *slog.Logger
	// rdmaLogged holds the executors whose RDMA report was logged.
	rdmaLogged sync.Map
	// obs takes the news heartbeats and exit reports carry; may be nil.
	obs *observer
	// served are the files executors fetch (FetchFile), by name.
	served map[string]string
	// requireTLS refuses registrations that did not come over mutual TLS
	// (spindle.job.tls.enabled), should the server ever be built without.
	requireTLS bool
	// creds keeps the executors' Hadoop credentials fresh; may be nil.
	creds CredentialKeeper
	// rows collects the workers' rows for FeedRows; nil when the plan
	// knows them.
	rows *feed.RowTally
	// gate answers the workers' held epoch ends (HoldEpoch) and inPlace
	// deals a lost worker's rest through it; nil unless the job goes on
	// in place with input.
	gate    *epochGate
	inPlace *inPlaceFeed
}

var _ driverpb.ControlServer = (*controlServer)(nil)

// Register blocks until the whole gang has registered, then hands out the
// rank, the cluster spec and the task.
func (s *controlServer) Register(ctx context.Context, req *driverpb.RegisterRequest) (*driverpb.RegisterResponse, error) {
	transport := transportOf(ctx)
	if s.requireTLS && !strings.HasPrefix(transport, "mutual TLS") {
		return nil, status.Errorf(codes.Unauthenticated, "driver: spindle.job.tls.enabled: executor %s registered over %s, not mutual TLS", req.GetExecutorId(), transport)
	}
	m, err := s.roster.register(req)
	if err != nil {
		return nil, toStatus(err)
	}
	s.logger.Info("executor registered", "executor", req.GetExecutorId(), "rank", m.rank, "role", m.role, "role_rank", m.roleRank,
		"host", req.GetHost(), "pid", req.GetPid(), "transport", transport)
	select {
	case <-s.roster.ready:
	case <-s.roster.failed:
		return nil, status.Error(codes.Aborted, s.roster.err().Error())
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-s.stop:
		return nil, status.Error(codes.Unavailable, "driver: shutting down")
	}
	task, err := s.taskOf(ctx, m)
	if err != nil {
		return nil, status.Error(codes.Internal, fmt.Sprintf("build task for rank %d: %v", m.rank, err))
	}
	if m.replaces != "" && m.role == RoleWorker {
		task.Replacement = int32(m.replacement)
		s.logger.Info("a replacement worker registered; the other ranks kept running", "executor", m.id, "replaces", m.replaces, "rank", m.rank)
	} else if m.rejoins {
		task.PsRejoin = true
		s.logger.Info("a replacement parameter server registered; it rejoins the ring", "executor", m.id, "replaces", m.replaces, "ps", m.roleRank)
	}
	local, localSize := s.roster.localRanks(m)
	peers := s.roster.peerList()
	return &driverpb.RegisterResponse{
		Rank:           int32(m.rank),
		WorldSize:      int32(len(peers)),
		LocalRank:      int32(local),
		LocalWorldSize: int32(localSize),
		Peers:          peers,
		Task:           task,
		Credentials:    credentialsFor(s.creds, 0),
		Membership:     s.roster.currentMembership(),
	}, nil
}

// taskOf builds m's task: a replacement worker's resumes from the newest
// complete checkpoint.
func (s *controlServer) taskOf(ctx context.Context, m *member) (*driverpb.Task, error) {
	if m.replaces != "" && m.role == RoleWorker && s.replacementTask != nil {
		return s.replacementTask(ctx, m.rank, m.replacement)
	}
	if m.newcomer && m.signedIn != nil && s.boundaryNewcomer != nil {
		return s.boundaryNewcomer(ctx, m)
	}
	if m.newcomer && s.newcomerTask != nil {
		return s.newcomerTask(m.rank)
	}
	return s.tasks(m.rank)
}

// logRDMA logs an executor's RDMA report the first time it comes.
func (s *controlServer) logRDMA(executor, report string) {
	if report == "" {
		return
	}
	if _, seen := s.rdmaLogged.LoadOrStore(executor, true); !seen {
		s.logger.Info(report)
	}
}

// Heartbeat records liveness and progress.
func (s *controlServer) Heartbeat(ctx context.Context, req *driverpb.HeartbeatRequest) (*driverpb.HeartbeatResponse, error) {
	resp, err := s.roster.heartbeat(req.GetExecutorId(), req.GetProgress(), req.GetMembershipVersion())
	if err != nil {
		return nil, toStatus(err)
	}
	s.roster.setLocalizing(req.GetExecutorId(), req.GetLocalizing())
	if w := req.GetWorldBatches(); w != nil && s.inPlace != nil {
		s.inPlace.reported(w)
	}
	s.logRDMA(req.GetExecutorId(), req.GetRdma())
	s.obs.news(heartbeatNews(req))
	if s.creds != nil {
		gen := req.GetCredentialsGeneration()
		resp.Credentials = credentialsFor(s.creds, gen)
		if oldest, ok := s.roster.useCredentials(req.GetExecutorId(), gen); ok && oldest > 0 {
			s.creds.CredentialsInUse(oldest)
		}
	}
	return resp, nil
}

// ReportExit records how a training process ended.
func (s *controlServer) ReportExit(ctx context.Context, req *driverpb.ExitReport) (*driverpb.ExitAck, error) {
	s.logRDMA(req.GetExecutorId(), req.GetRdma())
	// Its last lines first, so they come before the job's verdict.
	s.obs.news(exitNews(req))
	s.logger.Debug("training process exited", "executor", req.GetExecutorId(), "rank", req.GetRank(),
		"exit_code", req.GetExitCode(), "signal", req.GetSignal())
	if err := s.roster.exit(req); err != nil {
		return nil, toStatus(err)
	}
	return &driverpb.ExitAck{}, nil
}

// toStatus maps driver errors to gRPC status codes.
func toStatus(err error) error {
	switch {
	case errors.Is(err, errStopped):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, os.ErrNotExist):
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.FailedPrecondition, err.Error())
}
