package master

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// TestNewLeaderAnswersStatusOnceCaughtUp: a master Raft has just elected
// but whose replica has not yet applied everything committed before its
// term (it has not taken up the leader's duties: after a restart it
// replays its log from the start) sends status reads elsewhere rather
// than answer "as the leader" with states long gone; a driver asking
// whether the cluster has room for an elastic job to grow would otherwise
// see room freed minutes ago. Once caught up it answers.
func TestNewLeaderAnswersStatusOnceCaughtUp(t *testing.T) {
	g := startGroup(t, 1, false, nil)
	m := g.ms[g.leader()]
	s := &service{m: m}
	// The moment between election and barrier, held open: Raft says
	// leader, the duties are not taken up.
	ls := m.leader.Swap(nil)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(200*time.Millisecond))
	defer cancel()
	if resp, err := s.ClusterStatus(ctx, &pb.ClusterStatusRequest{}); !errors.Is(err, apierr.ErrNotLeader) {
		t.Errorf("status from a leader still catching up: %v, %v; want ErrNotLeader", resp.GetServedBy(), err)
	}
	m.leader.CompareAndSwap(nil, ls)
	resp, err := s.ClusterStatus(context.Background(), &pb.ClusterStatusRequest{})
	if err != nil || resp.GetServedBy().GetState() != "Leader" {
		t.Fatalf("status from the leader once caught up: %v, %v", resp.GetServedBy(), err)
	}
}
