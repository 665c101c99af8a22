package yarntest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/am"
	"github.com/spindle-ml/spindle/yarn/client"
)

// nodeManager is one NodeManager: its resources, its containers and its
// ContainerManagementProtocol server.
type nodeManager struct {
	index  int
	cfg    NodeConfig
	addr   string
	nodeID *pb.NodeIdProto
	dir    string
	srv    *hadooprpc.Server
	cancel context.CancelFunc

	// Guarded by Cluster.mu.
	state      pb.NodeStateProto
	health     string
	usedMB     int64
	usedVCores int64
	usedGPUs   int64
	containers map[string]*container

	cacheMu sync.Mutex
	cache   map[string]string // localized resources: source and timestamp -> local path
}

func (n *nodeManager) fits(x need) bool {
	return n.usedMB+x.mem <= int64(n.cfg.MemoryMB) && n.usedVCores+x.vcores <= int64(n.cfg.VCores) && n.usedGPUs+x.gpus <= int64(n.cfg.GPUs)
}

func (n *nodeManager) freeMB() int64 { return int64(n.cfg.MemoryMB) - n.usedMB }

func (n *nodeManager) reportLocked() *pb.NodeReportProto {
	live := 0
	for _, ct := range n.containers {
		if !ct.completed {
			live++
		}
	}
	capab := &pb.ResourceProto{Memory: proto.Int64(int64(n.cfg.MemoryMB)), VirtualCores: proto.Int32(int32(n.cfg.VCores))}
	if n.cfg.GPUs > 0 {
		capab.ResourceValueMap = []*pb.ResourceInformationProto{{Key: proto.String(am.GPUResource), Value: proto.Int64(int64(n.cfg.GPUs))}}
	}
	return &pb.NodeReportProto{
		NodeId: n.nodeID, HttpAddress: proto.String(n.addr), RackName: proto.String("/default-rack"),
		Used:       &pb.ResourceProto{Memory: proto.Int64(n.usedMB), VirtualCores: proto.Int32(int32(n.usedVCores))},
		Capability: capab, NumContainers: proto.Int32(int32(live)), NodeState: n.state.Enum(), HealthReport: proto.String(n.health),
	}
}

func (c *Cluster) nodeByAddrLocked(addr string) *nodeManager {
	for _, n := range c.nodes {
		if n.addr == addr {
			return n
		}
	}
	return nil
}

func (c *Cluster) startNode(i int, cfg NodeConfig) (*nodeManager, error) {
	bind := cmp.Or(cfg.Host, c.cfg.Host)
	ln, err := net.Listen("tcp", net.JoinHostPort(bind, "0"))
	if err != nil {
		return nil, fmt.Errorf("yarntest: node %d: listen on %s: %w", i, bind, err)
	}
	host, portS, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portS)
	n := &nodeManager{
		index: i, cfg: cfg, addr: ln.Addr().String(), nodeID: &pb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(int32(port))},
		dir: filepath.Join(c.cfg.Dir, fmt.Sprintf("nm%d", i)), state: pb.NodeStateProto_NS_RUNNING, health: "",
		containers: map[string]*container{}, cache: map[string]string{},
	}
	n.srv, err = hadooprpc.NewServer(hadooprpc.ServerConfig{Name: fmt.Sprintf("nodemanager%d", i), Logger: c.log,
		SASL: hadooprpc.TokenServer{Lookup: c.nmLookup(n), Protection: c.cfg.RPCProtection}}, c.containerManagement(n))
	if err != nil {
		ln.Close()
		return nil, err
	}
	var ctx context.Context
	ctx, n.cancel = context.WithCancel(c.ctx)
	c.serve(n.srv, ln, ctx)
	return n, nil
}

// containerManagement is ContainerManagementProtocol on node n.
func (c *Cluster) containerManagement(n *nodeManager) *hadooprpc.Service {
	svc := hadooprpc.NewService(am.NMProtocolName)
	hadooprpc.Handle(svc, "startContainers", func(ctx context.Context, req *pb.StartContainersRequestProto) (*pb.StartContainersResponseProto, error) {
		return c.startContainers(ctx, n, req)
	})
	hadooprpc.Handle(svc, "stopContainers", func(ctx context.Context, req *pb.StopContainersRequestProto) (*pb.StopContainersResponseProto, error) {
		return c.stopContainers(ctx, n, req)
	})
	hadooprpc.Handle(svc, "getContainerStatuses", func(ctx context.Context, req *pb.GetContainerStatusesRequestProto) (*pb.GetContainerStatusesResponseProto, error) {
		return c.getContainerStatuses(ctx, n, req)
	})
	return svc
}

// nmCaller returns the application attempt a call's NMToken names.
func nmCaller(ctx context.Context) (string, error) {
	caller, _ := hadooprpc.CallerFromContext(ctx)
	if caller.Auth != hadooprpc.MethodToken {
		return "", hadooprpc.Errorf(classAccessControl, "SIMPLE authentication is not enabled.  Available:[TOKEN]: a NodeManager takes NMTokens only")
	}
	return caller.RealUser, nil
}

func containerFailure(id *pb.ContainerIdProto, err error) *pb.ContainerExceptionMapProto {
	class := classYarn
	msg := err.Error()
	if re, ok := err.(*hadooprpc.RemoteError); ok {
		class, msg = re.Class, re.Message
	}
	return &pb.ContainerExceptionMapProto{ContainerId: id, Exception: &pb.SerializedExceptionProto{ClassName: proto.String(class), Message: proto.String(msg)}}
}

func (c *Cluster) startContainers(ctx context.Context, n *nodeManager, req *pb.StartContainersRequestProto) (*pb.StartContainersResponseProto, error) {
	attempt, err := nmCaller(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pb.StartContainersResponseProto{}
	c.mu.Lock()
	c.startCalls++
	c.mu.Unlock()
	for _, r := range req.GetStartContainerRequest() {
		c.mu.Lock()
		ct, err := c.claimLocked(n, attempt, r.GetContainerToken())
		c.mu.Unlock()
		if err != nil {
			var id *pb.ContainerIdProto
			var tid pb.ContainerTokenIdentifierProto
			if proto.Unmarshal(r.GetContainerToken().GetIdentifier(), &tid) == nil {
				id = tid.GetContainerId()
			}
			resp.FailedRequests = append(resp.FailedRequests, containerFailure(id, err))
			continue
		}
		resp.SucceededRequests = append(resp.SucceededRequests, ct.id)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.run(ct, r.GetContainerLaunchContext(), nil)
		}()
	}
	return resp, nil
}

// claimLocked checks a start request's container token and marks its
// container started. Called with c.mu held.
func (c *Cluster) claimLocked(n *nodeManager, attempt string, tok *pb.TokenProto) (*container, error) {
	if n.state != pb.NodeStateProto_NS_RUNNING {
		return nil, hadooprpc.Errorf(classYarn, "NodeManager %s is %s and starts no containers", n.addr, n.state)
	}
	id, err := c.checkContainerToken(n, attempt, tok)
	if err != nil {
		return nil, err
	}
	cid := client.ContainerString(id.GetContainerId())
	ct, ok := n.containers[cid]
	switch {
	case !ok:
		return nil, hadooprpc.Errorf(classYarn, "Container %s was not allocated on %s", cid, n.addr)
	case ct.started:
		return nil, hadooprpc.Errorf(classYarn, "Container %s already is running on this node!!", cid)
	case ct.completed:
		return nil, hadooprpc.Errorf(classYarn, "Container %s has completed (%s)", cid, ct.diagnostics)
	case ct.app.ended():
		return nil, hadooprpc.Errorf(classYarn, "Application %s has ended %s; container %s is not started", ct.app.idString(), ct.app.state, cid)
	}
	ct.started = true
	return ct, nil
}

// ownedLocked finds container id on n for attempt. Called with c.mu held.
func ownedLocked(n *nodeManager, attempt string, id *pb.ContainerIdProto) (*container, error) {
	cid := client.ContainerString(id)
	ct, ok := n.containers[cid]
	if !ok {
		return nil, hadooprpc.Errorf(classContainerNotStarted, "Container %s is not handled by this NodeManager", cid)
	}
	if got := client.AttemptString(id.GetAppAttemptId()); got != attempt {
		return nil, hadooprpc.Errorf(classAccessControl, "Unauthorized request: NMToken for application attempt : %s was used for container %s of %s", attempt, cid, got)
	}
	return ct, nil
}

func (c *Cluster) stopContainers(ctx context.Context, n *nodeManager, req *pb.StopContainersRequestProto) (*pb.StopContainersResponseProto, error) {
	attempt, err := nmCaller(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pb.StopContainersResponseProto{}
	var stop []*container
	c.mu.Lock()
	for _, id := range req.GetContainerId() {
		ct, err := ownedLocked(n, attempt, id)
		if err != nil {
			resp.FailedRequests = append(resp.FailedRequests, containerFailure(id, err))
			continue
		}
		resp.SucceededRequests = append(resp.SucceededRequests, id)
		if ct.completed {
			continue
		}
		ct.forceLocked(am.ExitKilledByAM, "Container killed by the ApplicationMaster.\nContainer killed on request. Exit code is 143")
		if ct.proc == nil && !ct.started {
			c.completeLocked(ct, am.ExitKilledByAM, "Container killed by the ApplicationMaster before it started.")
			continue
		}
		stop = append(stop, ct)
	}
	c.mu.Unlock()
	for _, ct := range stop {
		ct.signal(false)
	}
	return resp, nil
}

func (c *Cluster) getContainerStatuses(ctx context.Context, n *nodeManager, req *pb.GetContainerStatusesRequestProto) (*pb.GetContainerStatusesResponseProto, error) {
	attempt, err := nmCaller(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pb.GetContainerStatusesResponseProto{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.GetContainerId() {
		ct, err := ownedLocked(n, attempt, id)
		if err != nil {
			resp.FailedRequests = append(resp.FailedRequests, containerFailure(id, err))
			continue
		}
		resp.Status = append(resp.Status, ct.statusLocked())
	}
	return resp, nil
}

// container is a container from allocation to completion.
type container struct {
	id        *pb.ContainerIdProto
	idStr     string
	app       *app
	attempt   int32
	node      *nodeManager
	need      need
	resource  *pb.ResourceProto
	priority  int32
	isAM      bool
	allocated time.Time
	done      chan struct{}

	// Guarded by Cluster.mu.
	started     bool
	execID      string
	forced      *forcedEnd
	completed   bool
	exitStatus  int32
	diagnostics string
	workDir     string
	logDir      string

	pmu   sync.Mutex
	proc  *processHandle
	grace time.Duration
	wg    *sync.WaitGroup
	// cancel stops a simulated container (Config.Launcher).
	cancel context.CancelFunc
}

// forcedEnd is the status YARN gives a container it ended itself
// (released, preempted, killed for memory, lost with its node).
type forcedEnd struct {
	code int32
	diag string
}

func (ct *container) forceLocked(code int32, diag string) {
	if ct.forced == nil {
		ct.forced = &forcedEnd{code: code, diag: diag}
	}
}

func (ct *container) statusLocked() *pb.ContainerStatusProto {
	st := &pb.ContainerStatusProto{ContainerId: ct.id, Capability: ct.resource}
	switch {
	case ct.completed:
		st.State = pb.ContainerStateProto_C_COMPLETE.Enum()
		st.ExitStatus = proto.Int32(ct.exitStatus)
		st.Diagnostics = proto.String(ct.diagnostics)
	case ct.started:
		st.State = pb.ContainerStateProto_C_RUNNING.Enum()
		st.Diagnostics = proto.String("")
	default:
		st.State = pb.ContainerStateProto_C_NEW.Enum()
		st.Diagnostics = proto.String("")
	}
	return st
}

func (ct *container) infoLocked() ContainerInfo {
	info := ContainerInfo{ID: ct.idStr, App: ct.app.idString(), Node: ct.node.index, AM: ct.isAM, ExecutorID: ct.execID,
		WorkDir: ct.workDir, LogDir: ct.logDir}
	ct.pmu.Lock()
	if ct.proc != nil {
		info.PID = ct.proc.pid
		info.Running = !ct.proc.exited()
	}
	ct.pmu.Unlock()
	if ct.completed {
		info.ExitStatus, info.Diagnostics = ct.exitStatus, ct.diagnostics
	}
	return info
}

// completeLocked records a container's end, gives its resources back and
// tells its application. Called with c.mu held.
func (c *Cluster) completeLocked(ct *container, code int32, diag string) {
	if ct.completed {
		return
	}
	ct.completed, ct.exitStatus, ct.diagnostics = true, code, diag
	close(ct.done)
	c.releaseResourcesLocked(ct)
	a := ct.app
	c.log.Info("container completed", "container", ct.idStr, "node", ct.node.addr, "exit_status", code, "am", ct.isAM)
	if ct.isAM {
		if ct.attempt == a.attempt {
			c.amEndedLocked(a, ct)
		}
		return
	}
	delete(a.containers, ct.idStr)
	if ct.attempt == a.attempt && !a.ended() {
		a.completed = append(a.completed, ct.statusLocked())
	}
}

// amEndedLocked handles the end of the current attempt's AM container:
// unless the AM unregistered, the attempt failed, and YARN starts another
// one or fails the application. Called with c.mu held.
func (c *Cluster) amEndedLocked(a *app, ct *container) {
	if a.ended() {
		return
	}
	diag := fmt.Sprintf("AM Container for %s exited with exitCode: %d\n%s", a.attemptString(), ct.exitStatus, ct.diagnostics)
	for _, x := range a.containers {
		x.forceLocked(am.ExitKilledAppFinished, "Container of a failed application attempt")
		x.signal(false)
	}
	if a.attempt < a.maxAttempts {
		c.log.Info("applicationmaster attempt failed; starting another", "attempt", a.attemptString())
		c.newAttemptLocked(a)
		a.state = pb.YarnApplicationStateProto_ACCEPTED
		a.diagnostics = diag + "\nFailing this attempt. A new attempt is started."
		c.wake()
		return
	}
	c.endLocked(a, pb.YarnApplicationStateProto_FAILED, pb.FinalApplicationStatusProto_APP_FAILED,
		fmt.Sprintf("Application %s failed %d times due to %s\nFailing this attempt. Failing the application.", a.idString(), a.attempt, diag), false)
}

// launchAM starts an AM container: its launch context from the
// submission, and the attempt's AMRMToken added to its credentials.
func (c *Cluster) launchAM(ct *container) {
	c.mu.Lock()
	a := ct.app
	ct.started = true
	tok := c.amrmToken(a, c.wrongAMRM)
	a.amrmKeyID = c.amrmKeys.current
	clc := a.sc.GetAmContainerSpec()
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(ct, clc, tok)
	}()
}
