package yarntest

import (
	"context"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/am"
	"github.com/spindle-ml/spindle/yarn/client"
)

// masterProtocol is ApplicationMasterProtocol on the scheduler port.
func (c *Cluster) masterProtocol() *hadooprpc.Service {
	svc := hadooprpc.NewService(am.ProtocolName)
	hadooprpc.Handle(svc, "registerApplicationMaster", c.registerApplicationMaster)
	hadooprpc.Handle(svc, "allocate", c.allocate)
	hadooprpc.Handle(svc, "finishApplicationMaster", c.finishApplicationMaster)
	return svc
}

// attemptLocked finds the application attempt a call authenticated as
// (its AMRMToken's). Called with c.mu held.
func (c *Cluster) attemptLocked(ctx context.Context) (*app, error) {
	caller, _ := hadooprpc.CallerFromContext(ctx)
	if caller.Auth != hadooprpc.MethodToken {
		return nil, hadooprpc.Errorf(classAccessControl, "SIMPLE authentication is not enabled.  Available:[TOKEN]: an ApplicationMaster authenticates with its AMRMToken")
	}
	for _, a := range c.apps {
		if a.submitted && a.attempt > 0 && a.attemptString() == caller.RealUser {
			return a, nil
		}
	}
	return nil, hadooprpc.Errorf(classAttemptNotFound, "Application attempt %s doesn't exist in ApplicationMasterService cache.", caller.RealUser)
}

func (c *Cluster) registerApplicationMaster(ctx context.Context, req *pb.RegisterApplicationMasterRequestProto) (*pb.RegisterApplicationMasterResponseProto, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, err := c.attemptLocked(ctx)
	if err != nil {
		return nil, err
	}
	if a.registered {
		return nil, hadooprpc.Errorf(classInvalidAMRequest, "Application Master is already registered : %s", a.idString())
	}
	if a.ended() {
		return nil, hadooprpc.Errorf(classAttemptNotFound, "Application %s has ended %s", a.idString(), a.state)
	}
	a.registered = true
	a.host, a.rpcPort, a.trackingURL = req.GetHost(), req.GetRpcPort(), req.GetTrackingUrl()
	a.state = pb.YarnApplicationStateProto_RUNNING
	a.diagnostics = ""
	a.amrmKeyID = c.amrmKeys.current
	c.log.Info("applicationmaster registered", "attempt", a.attemptString(), "host", a.host, "port", a.rpcPort)
	return &pb.RegisterApplicationMasterResponseProto{MaximumCapability: c.maxCapability(), Queue: proto.String(a.queue)}, nil
}

func (c *Cluster) allocate(ctx context.Context, req *pb.AllocateRequestProto) (*pb.AllocateResponseProto, error) {
	c.mu.Lock()
	resp, stop, err := c.amHeartbeatLocked(ctx, req)
	c.mu.Unlock()
	// Outside the lock: stopping a released container's process waits.
	for _, ct := range stop {
		ct.signal(false)
	}
	return resp, err
}

// amHeartbeatLocked answers one heartbeat of the attempt: it takes the asks,
// blacklist and releases, schedules, and returns the response with the
// released containers whose processes are to be stopped.
func (c *Cluster) amHeartbeatLocked(ctx context.Context, req *pb.AllocateRequestProto) (*pb.AllocateResponseProto, []*container, error) {
	a, err := c.attemptLocked(ctx)
	if err != nil {
		return nil, nil, err
	}
	if a.ended() {
		return &pb.AllocateResponseProto{AMCommand: pb.AMCommandProto_AM_SHUTDOWN.Enum(), ResponseId: proto.Int32(a.responseID)}, nil, nil
	}
	if !a.registered {
		return nil, nil, hadooprpc.Errorf(classNotRegistered, "AM is not registered for known application attempt: %s or RM had restarted after AM registered. AM should re-register.", a.attemptString())
	}
	switch {
	case req.GetResponseId()+1 == a.responseID && a.lastResp != nil:
		// A retry of the last call: answer it again.
		return a.lastResp, nil, nil
	case req.GetResponseId() != a.responseID:
		return nil, nil, hadooprpc.Errorf(classInvalidAMRequest, "Invalid responseId in AllocateRequest from application attempt: %s, expect responseId to be %d, but get %d", a.attemptString(), a.responseID, req.GetResponseId())
	}
	a.progress = req.GetProgress()
	if err := c.takeAsksLocked(a, req); err != nil {
		return nil, nil, err
	}
	stop := c.releaseLocked(a, req)
	c.scheduleLocked(a)

	resp := &pb.AllocateResponseProto{NumClusterNodes: proto.Int32(int32(len(c.nodes)))}
	c.handOutLocked(a, resp)
	c.renewTokensLocked(a, resp)
	resp.CompletedContainerStatuses, a.completed = a.completed, nil
	for _, n := range a.lostNodes {
		resp.UpdatedNodes = append(resp.UpdatedNodes, n.reportLocked())
	}
	a.lostNodes = nil
	resp.Limit = c.headroomLocked(a)
	a.responseID++
	resp.ResponseId = proto.Int32(a.responseID)
	a.lastResp = resp
	return resp, stop, nil
}

// takeAsksLocked replaces the attempt's asks with those in req and
// updates its blacklist. An ask over the maximum allocation is refused.
func (c *Cluster) takeAsksLocked(a *app, req *pb.AllocateRequestProto) error {
	for _, ask := range req.GetAsk() {
		k := askKey{priority: ask.GetPriority().GetPriority(), resource: ask.GetResourceName()}
		if n := needOf(ask.GetCapability()); n.mem > int64(c.cfg.MaxAllocationMB) {
			return hadooprpc.Errorf(classInvalidResource, "Invalid resource request, requested memory < 0, or requested memory > max configured, requestedMemory=%d, maxMemory=%d", n.mem, c.cfg.MaxAllocationMB)
		}
		if ask.GetNumContainers() <= 0 {
			delete(a.asks, k)
			continue
		}
		a.asks[k] = proto.Clone(ask).(*pb.ResourceRequestProto)
	}
	for _, h := range req.GetBlacklistRequest().GetBlacklistAdditions() {
		a.blacklist[h] = true
	}
	for _, h := range req.GetBlacklistRequest().GetBlacklistRemovals() {
		delete(a.blacklist, h)
	}
	return nil
}

// releaseLocked gives back the containers req releases. It returns those
// with a running process, to be stopped once the lock is released.
func (c *Cluster) releaseLocked(a *app, req *pb.AllocateRequestProto) []*container {
	var stop []*container
	for _, id := range req.GetRelease() {
		ct, ok := a.containers[client.ContainerString(id)]
		if !ok {
			continue
		}
		if ct.proc == nil {
			c.completeLocked(ct, am.ExitAborted, "Container released by application")
		} else {
			ct.forceLocked(am.ExitAborted, "Container released by application")
			stop = append(stop, ct)
		}
	}
	return stop
}

// handOutLocked puts the containers allocated since the last heartbeat in
// resp, with an NMToken for each node the attempt has none current for.
func (c *Cluster) handOutLocked(a *app, resp *pb.AllocateResponseProto) {
	for _, ct := range a.allocated {
		ctp := &pb.ContainerProto{
			Id: ct.id, NodeId: ct.node.nodeID, NodeHttpAddress: proto.String(ct.node.addr), Resource: ct.resource,
			Priority: &pb.PriorityProto{Priority: proto.Int32(ct.priority)}, ContainerToken: c.containerToken(a, ct),
		}
		resp.AllocatedContainers = append(resp.AllocatedContainers, ctp)
		if a.nmTokensFor[ct.node.addr] != c.nmKeys.current {
			resp.NmTokens = append(resp.NmTokens, c.nmToken(a, ct.node, c.wrongNM))
			a.nmTokensFor[ct.node.addr] = c.nmKeys.current
		}
	}
	a.allocated = nil
}

// renewTokensLocked: after a key roll, every node the attempt talks to
// gets a fresh NMToken, and the attempt a fresh AMRMToken.
func (c *Cluster) renewTokensLocked(a *app, resp *pb.AllocateResponseProto) {
	nodes := make([]string, 0, len(a.nmTokensFor))
	for addr := range a.nmTokensFor {
		nodes = append(nodes, addr)
	}
	sort.Strings(nodes)
	for _, addr := range nodes {
		if a.nmTokensFor[addr] != c.nmKeys.current {
			if n := c.nodeByAddrLocked(addr); n != nil {
				resp.NmTokens = append(resp.NmTokens, c.nmToken(a, n, c.wrongNM))
			}
			a.nmTokensFor[addr] = c.nmKeys.current
		}
	}
	if a.amrmKeyID != c.amrmKeys.current {
		resp.AmRmToken = c.amrmToken(a, false)
		a.amrmKeyID = c.amrmKeys.current
	}
}

// headroomLocked is the attempt's headroom, as the CapacityScheduler
// gives it: what is free in the cluster, within what the application's
// queue has left.
func (c *Cluster) headroomLocked(a *app) *pb.ResourceProto {
	total, used := c.clusterRoomLocked()
	freeMem, freeVC := total.mem-used.mem, total.vcores-used.vcores
	if q := c.queues[a.queue]; q != nil {
		if q.cfg.MemoryMB > 0 {
			freeMem = min(freeMem, int64(q.cfg.MemoryMB)-q.usedMB)
		}
		if q.cfg.VCores > 0 {
			freeVC = min(freeVC, int64(q.cfg.VCores)-q.usedVCores)
		}
	}
	return &pb.ResourceProto{Memory: proto.Int64(max(0, freeMem)), VirtualCores: proto.Int32(int32(max(0, freeVC)))}
}

func (c *Cluster) finishApplicationMaster(ctx context.Context, req *pb.FinishApplicationMasterRequestProto) (*pb.FinishApplicationMasterResponseProto, error) {
	c.mu.Lock()
	a, err := c.attemptLocked(ctx)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if a.ended() {
		c.mu.Unlock()
		return &pb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(true)}, nil
	}
	if !a.registered {
		c.mu.Unlock()
		return nil, hadooprpc.Errorf(classNotRegistered, "Application Master is trying to unregister before registering for: %s", a.attemptString())
	}
	a.unregistered = true
	final := req.GetFinalApplicationStatus()
	if final == pb.FinalApplicationStatusProto_APP_UNDEFINED {
		final = pb.FinalApplicationStatusProto_APP_FAILED
	}
	if u := req.GetTrackingUrl(); u != "" {
		a.trackingURL = u
	}
	kill := c.endLocked(a, pb.YarnApplicationStateProto_FINISHED, final, req.GetDiagnostics(), false)
	amc := a.amc
	c.mu.Unlock()
	c.log.Info("applicationmaster unregistered", "attempt", a.attemptString(), "final", final)
	for _, ct := range kill {
		ct.signal(false)
	}
	// The AM may clean up for a while after unregistering; then YARN stops
	// its container.
	if amc != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			select {
			case <-amc.done:
			case <-c.ctx.Done():
			case <-time.After(c.cfg.FinishGrace):
				amc.signal(false)
			}
		}()
	}
	return &pb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(true)}, nil
}
