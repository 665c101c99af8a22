package yarntest

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/am"
	"github.com/spindle-ml/spindle/yarn/client"
)

// clientProtocol is ApplicationClientProtocol on the ResourceManager's
// client port.
func (c *Cluster) clientProtocol() *hadooprpc.Service {
	svc := hadooprpc.NewService(client.ProtocolName)
	hadooprpc.Handle(svc, "getNewApplication", c.getNewApplication)
	hadooprpc.Handle(svc, "submitApplication", c.submitApplication)
	hadooprpc.Handle(svc, "getApplicationReport", c.getApplicationReport)
	hadooprpc.Handle(svc, "forceKillApplication", c.forceKillApplication)
	hadooprpc.Handle(svc, "getClusterMetrics", c.getClusterMetrics)
	hadooprpc.Handle(svc, "getQueueInfo", c.getQueueInfo)
	hadooprpc.Handle(svc, "getClusterNodes", c.getClusterNodes)
	hadooprpc.Handle(svc, "getApplications", c.getApplications)
	return svc
}

func (c *Cluster) maxCapability() *pb.ResourceProto {
	vc := 0
	for _, n := range c.cfg.Nodes {
		vc = max(vc, n.VCores)
	}
	return &pb.ResourceProto{Memory: proto.Int64(int64(c.cfg.MaxAllocationMB)), VirtualCores: proto.Int32(int32(vc))}
}

func (c *Cluster) getNewApplication(ctx context.Context, _ *pb.GetNewApplicationRequestProto) (*pb.GetNewApplicationResponseProto, error) {
	caller, _ := hadooprpc.CallerFromContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	id := &pb.ApplicationIdProto{Id: proto.Int32(c.nextApp), ClusterTimestamp: proto.Int64(c.clusterTS)}
	c.apps[c.nextApp] = &app{id: id, user: caller.User, state: pb.YarnApplicationStateProto_NEW, start: c.now()}
	c.nextApp++
	return &pb.GetNewApplicationResponseProto{ApplicationId: id, MaximumCapability: c.maxCapability()}, nil
}

func (c *Cluster) appLocked(id *pb.ApplicationIdProto) (*app, error) {
	a, ok := c.apps[id.GetId()]
	if !ok || id.GetClusterTimestamp() != c.clusterTS {
		return nil, hadooprpc.Errorf(classAppNotFound, "Application with id '%s' doesn't exist in RM. Please check that the job submission was successful.", client.AppIDFromProto(id))
	}
	return a, nil
}

func (c *Cluster) submitApplication(ctx context.Context, req *pb.SubmitApplicationRequestProto) (*pb.SubmitApplicationResponseProto, error) {
	caller, _ := hadooprpc.CallerFromContext(ctx)
	sc := req.GetApplicationSubmissionContext()
	c.mu.Lock()
	defer c.mu.Unlock()
	a, err := c.appLocked(sc.GetApplicationId())
	if err != nil {
		return nil, err
	}
	if a.submitted {
		// A resubmission of the same id is accepted and ignored, as YARN
		// does for a client retrying.
		return &pb.SubmitApplicationResponseProto{}, nil
	}
	q := sc.GetQueue()
	if _, ok := c.queues[q]; !ok {
		return nil, hadooprpc.Errorf(classYarn, "Failed to submit %s to YARN : Application %s submitted by user %s to unknown queue: %s", a.idString(), a.idString(), caller.User, q)
	}
	if sc.GetAmContainerSpec() == nil || len(sc.GetAmContainerSpec().GetCommand()) == 0 {
		return nil, hadooprpc.Errorf(classYarn, "Failed to submit %s to YARN : the AM container launch context has no command", a.idString())
	}
	if n := needOf(sc.GetResource()); n.mem <= 0 || n.mem > int64(c.cfg.MaxAllocationMB) {
		return nil, hadooprpc.Errorf(classInvalidResource, "Invalid resource request, requested memory < 0, or requested memory > max configured, requestedMemory=%d, maxMemory=%d", n.mem, c.cfg.MaxAllocationMB)
	}
	a.sc, a.submitted = sc, true
	a.user = caller.User
	a.name, a.queue, a.appType, a.tags = sc.GetApplicationName(), q, sc.GetApplicationType(), sc.GetApplicationTags()
	a.priority = sc.GetPriority().GetPriority()
	a.maxAttempts = max(sc.GetMaxAppAttempts(), 1)
	a.state = pb.YarnApplicationStateProto_ACCEPTED
	a.diagnostics = "[test YARN] waiting for the ApplicationMaster's container"
	c.newAttemptLocked(a)
	c.log.Info("application submitted", "app", a.idString(), "user", a.user, "queue", q, "name", a.name)
	c.wake()
	return &pb.SubmitApplicationResponseProto{}, nil
}

// newAttemptLocked starts the next attempt's bookkeeping. Called with c.mu
// held.
func (c *Cluster) newAttemptLocked(a *app) {
	a.attempt++
	a.amc, a.registered, a.unregistered = nil, false, false
	a.host, a.rpcPort, a.trackingURL, a.progress = "", 0, "", 0
	a.responseID, a.lastResp = 0, nil
	a.nmTokensFor = map[string]int32{}
	a.asks = map[askKey]*pb.ResourceRequestProto{}
	a.blacklist = map[string]bool{}
	a.containers = map[string]*container{}
	a.allocated, a.completed, a.lostNodes = nil, nil, nil
	a.nextSeq = 0
}

func (c *Cluster) reportLocked(a *app) *pb.ApplicationReportProto {
	host, port := "N/A", int32(-1)
	if a.registered {
		host, port = a.host, a.rpcPort
	}
	r := &pb.ApplicationReportProto{
		ApplicationId: a.id, User: proto.String(a.user), Queue: proto.String(a.queue), Name: proto.String(a.name),
		Host: proto.String(host), RpcPort: proto.Int32(port), YarnApplicationState: a.state.Enum(),
		TrackingUrl: proto.String(a.trackingURL), OriginalTrackingUrl: proto.String(a.trackingURL),
		Diagnostics: proto.String(a.diagnostics), StartTime: proto.Int64(a.start.UnixMilli()),
		FinalApplicationStatus: a.final.Enum(), Progress: proto.Float32(a.progress),
		ApplicationType: proto.String(a.appType), ApplicationTags: a.tags,
		Priority: &pb.PriorityProto{Priority: proto.Int32(a.priority)},
	}
	if a.attempt > 0 {
		r.CurrentApplicationAttemptId = a.attemptID()
	}
	if !a.finish.IsZero() {
		r.FinishTime = proto.Int64(a.finish.UnixMilli())
	}
	var used need
	n := 0
	for _, ct := range a.containers {
		used.mem += ct.need.mem
		used.vcores += ct.need.vcores
		n++
	}
	if a.amc != nil && !a.amc.completed {
		used.mem += a.amc.need.mem
		used.vcores += a.amc.need.vcores
		n++
	}
	r.AppResource_Usage = &pb.ApplicationResourceUsageReportProto{NumUsedContainers: proto.Int32(int32(n)),
		UsedResources: &pb.ResourceProto{Memory: proto.Int64(used.mem), VirtualCores: proto.Int32(int32(used.vcores))}}
	return r
}

func (c *Cluster) getApplicationReport(ctx context.Context, req *pb.GetApplicationReportRequestProto) (*pb.GetApplicationReportResponseProto, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, err := c.appLocked(req.GetApplicationId())
	if err != nil {
		return nil, err
	}
	return &pb.GetApplicationReportResponseProto{ApplicationReport: c.reportLocked(a)}, nil
}

func (c *Cluster) getApplications(ctx context.Context, req *pb.GetApplicationsRequestProto) (*pb.GetApplicationsResponseProto, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &pb.GetApplicationsResponseProto{}
	for _, a := range c.appsInOrderLocked() {
		if !a.submitted {
			continue
		}
		if len(req.GetApplicationTypes()) > 0 && !containsFold(req.GetApplicationTypes(), a.appType) {
			continue
		}
		if len(req.GetApplicationStates()) > 0 && !containsState(req.GetApplicationStates(), a.state) {
			continue
		}
		resp.Applications = append(resp.Applications, c.reportLocked(a))
	}
	return resp, nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func containsState(list []pb.YarnApplicationStateProto, s pb.YarnApplicationStateProto) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *Cluster) forceKillApplication(ctx context.Context, req *pb.KillApplicationRequestProto) (*pb.KillApplicationResponseProto, error) {
	caller, _ := hadooprpc.CallerFromContext(ctx)
	c.mu.Lock()
	a, err := c.appLocked(req.GetApplicationId())
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if !a.submitted || a.ended() {
		c.mu.Unlock()
		return &pb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(true)}, nil
	}
	diag := fmt.Sprintf("Application %s was killed by user %s", a.idString(), caller.User)
	if d := req.GetDiagnostics(); d != "" {
		diag += " with diagnostics: " + d
	}
	kill := c.endLocked(a, pb.YarnApplicationStateProto_KILLED, pb.FinalApplicationStatusProto_APP_KILLED, diag, true)
	c.mu.Unlock()
	c.log.Info("application killed", "app", a.idString(), "by", caller.User)
	for _, ct := range kill {
		ct.signal(false)
	}
	return &pb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(true)}, nil
}

// endLocked puts a in a final state and returns the containers to stop:
// every executor container, and the AM's too when withAM. Called with
// c.mu held.
func (c *Cluster) endLocked(a *app, st pb.YarnApplicationStateProto, final pb.FinalApplicationStatusProto, diag string, withAM bool) []*container {
	a.state, a.final, a.diagnostics, a.finish = st, final, diag, c.now()
	var kill []*container
	for _, ct := range a.containers {
		kill = append(kill, ct)
	}
	if withAM && a.amc != nil {
		kill = append(kill, a.amc)
	}
	for _, ct := range kill {
		ct.forceLocked(am.ExitKilledAppFinished, "Container killed on application finish: "+st.String())
	}
	for k := range a.asks {
		delete(a.asks, k)
	}
	return kill
}

func (c *Cluster) getClusterMetrics(ctx context.Context, _ *pb.GetClusterMetricsRequestProto) (*pb.GetClusterMetricsResponseProto, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var active, lost, unhealthy int32
	for _, n := range c.nodes {
		switch n.state {
		case pb.NodeStateProto_NS_RUNNING:
			active++
		case pb.NodeStateProto_NS_LOST:
			lost++
		case pb.NodeStateProto_NS_UNHEALTHY:
			unhealthy++
		}
	}
	return &pb.GetClusterMetricsResponseProto{ClusterMetrics: &pb.YarnClusterMetricsProto{
		NumNodeManagers: proto.Int32(active), NumActiveNms: proto.Int32(active), NumLostNms: proto.Int32(lost), NumUnhealthyNms: proto.Int32(unhealthy),
	}}, nil
}

// clusterRoomLocked sums what the running nodes offer and use. Called
// with c.mu held.
func (c *Cluster) clusterRoomLocked() (total, used need) {
	for _, n := range c.nodes {
		if n.state != pb.NodeStateProto_NS_RUNNING {
			continue
		}
		total.mem += int64(n.cfg.MemoryMB)
		total.vcores += int64(n.cfg.VCores)
		used.mem += n.usedMB
		used.vcores += n.usedVCores
	}
	return total, used
}

func (c *Cluster) getQueueInfo(ctx context.Context, req *pb.GetQueueInfoRequestProto) (*pb.GetQueueInfoResponseProto, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := strings.TrimPrefix(req.GetQueueName(), "root.")
	q, ok := c.queues[name]
	if !ok {
		return nil, hadooprpc.Errorf(hadooprpc.ClassIOException, "Unknown queue: %s", req.GetQueueName())
	}
	total, used := c.clusterRoomLocked()
	limMem, limVC := total.mem, total.vcores
	if q.cfg.MemoryMB > 0 {
		limMem = min(limMem, int64(q.cfg.MemoryMB))
	}
	if q.cfg.VCores > 0 {
		limVC = min(limVC, int64(q.cfg.VCores))
	}
	availMem := max(0, min(limMem-q.usedMB, total.mem-used.mem))
	availVC := max(0, min(limVC-q.usedVCores, total.vcores-used.vcores))
	pending := c.pendingLocked(name)
	var running, apps int64
	for _, a := range c.apps {
		if a.queue == name && a.submitted {
			apps++
			if a.state == pb.YarnApplicationStateProto_RUNNING {
				running++
			}
		}
	}
	capacity, current := float32(1), float32(0)
	if total.mem > 0 {
		capacity = float32(limMem) / float32(total.mem)
		current = float32(q.usedMB) / float32(total.mem)
	}
	return &pb.GetQueueInfoResponseProto{QueueInfo: &pb.QueueInfoProto{
		QueueName: proto.String(name), QueuePath: proto.String("root." + name), Capacity: proto.Float32(capacity),
		MaximumCapacity: proto.Float32(capacity), CurrentCapacity: proto.Float32(current), State: pb.QueueStateProto_Q_RUNNING.Enum(),
		QueueStatistics: &pb.QueueStatisticsProto{
			NumAppsSubmitted: proto.Int64(apps), NumAppsRunning: proto.Int64(running),
			AvailableMemoryMB: proto.Int64(availMem), AllocatedMemoryMB: proto.Int64(q.usedMB), PendingMemoryMB: proto.Int64(pending.mem),
			AvailableVCores: proto.Int64(availVC), AllocatedVCores: proto.Int64(q.usedVCores), PendingVCores: proto.Int64(pending.vcores),
		},
	}}, nil
}

func (c *Cluster) getClusterNodes(ctx context.Context, req *pb.GetClusterNodesRequestProto) (*pb.GetClusterNodesResponseProto, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &pb.GetClusterNodesResponseProto{}
	for _, n := range c.nodes {
		if len(req.GetNodeStates()) > 0 && !containsNodeState(req.GetNodeStates(), n.state) {
			continue
		}
		resp.NodeReports = append(resp.NodeReports, n.reportLocked())
	}
	return resp, nil
}

func containsNodeState(list []pb.NodeStateProto, s pb.NodeStateProto) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
