package yarntest

import (
	"context"
	"fmt"
	"time"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/am"
)

// Launcher runs containers in this process instead of as processes, so
// one machine can hold the containers of thousands of simulated nodes:
// the NodeManagers still speak ContainerManagementProtocol and check every
// token, but a started container is a call to Launch.
type Launcher interface {
	// Launch runs one container until it ends or ctx is cancelled (the
	// container was stopped or its node lost) and returns its exit
	// status. It is called on its own goroutine, after
	// Config.StartLatency.
	Launch(ctx context.Context, c Launch) int32
}

// Launch is what a simulated container gets.
type Launch struct {
	// ContainerID is YARN's container id; Node the NodeManager's index
	// in the cluster; AM is true for an ApplicationMaster's container.
	ContainerID string
	Node        int
	AM          bool
	// Env is the launch context's environment.
	Env map[string]string
	// AMRMToken is the attempt's token, in an AM's container only.
	AMRMToken hadooprpc.Token
}

// simulate runs a container through the cluster's Launcher after the
// start latency, and records how it ended.
func (c *Cluster) simulate(ct *container, clc *pb.ContainerLaunchContextProto, amrm *pb.TokenProto) {
	l := Launch{ContainerID: ct.idStr, Node: ct.node.index, AM: ct.isAM, Env: map[string]string{}}
	for _, kv := range clc.GetEnvironment() {
		l.Env[kv.GetKey()] = kv.GetValue()
	}
	if amrm != nil {
		l.AMRMToken = hadooprpc.TokenFromProto(amrm)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	c.mu.Lock()
	ct.execID = l.Env["SPINDLE_EXECUTOR_ID"]
	ct.pmu.Lock()
	ct.cancel = cancel
	ct.pmu.Unlock()
	c.mu.Unlock()
	code := int32(am.ExitKilledByAM)
	t := time.NewTimer(c.cfg.StartLatency)
	select {
	case <-t.C:
		code = c.cfg.Launcher.Launch(ctx, l)
	case <-ctx.Done():
		t.Stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endedLocked(ct, code, func() string {
		return fmt.Sprintf("[test YARN] simulated container %s exited with %d", ct.idStr, code)
	})
}

// StartCalls is how many startContainers calls the NodeManagers answered.
func (c *Cluster) StartCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startCalls
}
