package yarntest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/yarntest"
	"github.com/spindle-ml/spindle/yarn/am"
)

// simLauncher runs simulated containers: the AM's hands over its token,
// every other one runs until stopped.
type simLauncher struct {
	amToken  chan hadooprpc.Token
	launched atomic.Int64
}

func (l *simLauncher) Launch(ctx context.Context, c yarntest.Launch) int32 {
	if c.AM {
		l.amToken <- c.AMRMToken
	} else {
		l.launched.Add(1)
	}
	<-ctx.Done()
	return 0
}

// TestAMStartsGangLargerThanEventBuffer holds and starts a gang of more
// containers than the AM's event channel holds, with nobody reading its
// events until Request returns, as the driver does: the AM's start
// events once filled the channel and blocked Request (and the allocate
// heartbeat with it) for good. Each node's containers start in one
// startContainers call (once one call each). The NodeManagers are
// simulated, and grant a few containers each per allocate call.
func TestAMStartsGangLargerThanEventBuffer(t *testing.T) {
	const n = 1100
	l := &simLauncher{amToken: make(chan hadooprpc.Token, 1)}
	c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 4, NodeMemoryMB: 1 << 20, NodeVCores: 400,
		Launcher: l, GrantsPerNode: 100})
	rm := rmClient(t, c)
	submit(t, rm, "default", 1, "spindle am")
	var tok hadooprpc.Token
	select {
	case tok = <-l.amToken:
	case <-time.After(testutil.Scale(30 * time.Second)):
		t.Fatal("the AM container was not launched")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	a, err := am.Start(ctx, am.Config{SchedulerAddrs: []string{c.SchedulerAddr()}, AMRMToken: tok, Host: "127.0.0.1", Port: 4040,
		MemoryOverheadMB: 128, HeartbeatInterval: 100 * time.Millisecond,
		LaunchContext: func(spec driver.ExecutorSpec) (*pb.ContainerLaunchContextProto, error) {
			return &pb.ContainerLaunchContextProto{
				Environment: []*pb.StringStringMapProto{{Key: proto.String("SPINDLE_EXECUTOR_ID"), Value: proto.String(spec.ID)}},
			}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	done := make(chan error, 1)
	go func() { done <- a.Request(ctx, specs(n)) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		a.Close() // unblocks a Request stuck on its events
		<-done
		t.Fatalf("Request of a gang of %d did not return (%d containers launched)", n, l.launched.Load())
	}
	if calls := a.AllocateCalls(); calls < 3 {
		t.Errorf("gang of %d granted in %d allocate calls; 4 nodes granting 100 each per call need at least 3", n, calls)
	}
	// One call per node starts all of its containers.
	if calls := c.StartCalls(); calls > 4 {
		t.Errorf("%d startContainers calls for %d containers on 4 nodes; want one a node", calls, n)
	}
	started := 0
	for started < n {
		select {
		case ev := <-a.Events():
			if ev.Kind == driver.ExecutorStarted {
				started++
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d start events", started, n)
		}
	}
	fctx, fcancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer fcancel()
	if err := a.Finish(fctx, pb.FinalApplicationStatusProto_APP_SUCCEEDED, ""); err != nil {
		t.Fatal(err)
	}
}
