package driver

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
)

// rowTally returns the tally through which the workers agree on their
// batches per epoch: when the plan left their rows unknown (a flight's
// endpoints dealt unread) and even is pad or drop. Nil otherwise.
func rowTally(plan *feed.JobPlan, even feed.EvenMode) *feed.RowTally {
	if !plan.RowsUnknown || even == feed.EvenOff {
		return nil
	}
	return feed.NewRowTally(len(plan.Ranks))
}

// FeedRows records a worker's rows and answers, once every worker has
// reported, with all of them (FeedTask.agree_rows). It waits for that,
// the caller's context, or the driver's stop.
func (s *controlServer) FeedRows(ctx context.Context, req *driverpb.FeedRowsRequest) (*driverpb.FeedRowsResponse, error) {
	if s.rows == nil {
		return nil, status.Error(codes.FailedPrecondition, "driver: this job's ranks know their rows from the plan")
	}
	rank, err := s.roster.feedRank(req.GetExecutorId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.rows.Report(rank, req.GetRows()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.logger.Debug("worker counted its rows", "executor", req.GetExecutorId(), "feed_rank", rank, "rows", req.GetRows())
	select {
	case <-s.rows.Done():
		return &driverpb.FeedRowsResponse{RowsPerRank: s.rows.Rows()}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-s.stop:
		return nil, status.Error(codes.Unavailable, "driver: shutting down")
	}
}

// feedRank returns the rank among the workers of the executor id: the
// share of the input it feeds.
func (g *roster) feedRank(id string) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[id]
	if !ok {
		return 0, fmt.Errorf("driver: unknown executor %q", id)
	}
	if !m.role.Feeds() {
		return 0, fmt.Errorf("driver: executor %q is a %s, which is fed nothing", id, m.role)
	}
	return m.roleRank, nil
}
