package am

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/client"
)

// heartbeat calls allocate until stop: fast while a gang is pending, at
// the configured interval otherwise.
func (a *Allocator) heartbeat() {
	fails := 0
	for {
		a.mu.Lock()
		pending := a.gang != nil || len(a.asks) > 0 || len(a.releases) > 0
		a.mu.Unlock()
		wait := a.cfg.HeartbeatInterval
		if pending {
			wait = 100 * time.Millisecond
		}
		select {
		case <-a.stop:
			return
		case <-a.kick:
		case <-time.After(wait):
		}
		if err := a.allocate(); err != nil {
			fails++
			a.log.Warn("allocate failed", "err", err, "consecutive", fails)
			if errors.Is(err, ErrShutdown) || fails >= 30 {
				a.fail(err)
				return
			}
			continue
		}
		fails = 0
	}
}

// fail records a fatal error and reports every live executor lost.
func (a *Allocator) fail(err error) {
	a.mu.Lock()
	if a.fatal == nil {
		a.fatal = err
	}
	var lost []*container
	for _, c := range a.byID {
		select {
		case <-c.done:
		default:
			close(c.done)
			lost = append(lost, c)
		}
	}
	if g := a.gang; g != nil {
		select {
		case <-g.ready:
		default:
			close(g.ready)
		}
	}
	a.mu.Unlock()
	for _, c := range lost {
		a.emit(driver.Event{ExecutorID: c.spec.ID, Kind: driver.ExecutorLost, Host: c.host, Message: "the ApplicationMaster lost the ResourceManager: " + err.Error(), Time: time.Now()})
	}
}

// allocate makes one allocate call and applies its answer.
func (a *Allocator) allocate() error {
	a.mu.Lock()
	req := &pb.AllocateRequestProto{
		Ask: a.asks, Release: a.releases, ResponseId: proto.Int32(a.responseID), Progress: proto.Float32(a.progress),
	}
	if len(a.exclude) > 0 {
		req.BlacklistRequest = &pb.ResourceBlacklistRequestProto{BlacklistAdditions: a.exclude}
	}
	if a.tracking != a.sentTracking {
		// The driver's web UI came up after registration (cluster mode).
		req.TrackingUrl = proto.String(a.tracking)
		a.sentTracking = a.tracking
	}
	asks, releases, exclude := a.asks, a.releases, a.exclude
	a.asks, a.releases, a.exclude = nil, nil, nil
	a.allocCalls++
	a.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.RMCallTimeout)
	defer cancel()
	resp := &pb.AllocateResponseProto{}
	if err := a.call(ctx, "allocate", req, resp); err != nil {
		// Send the same asks and releases again next time.
		a.mu.Lock()
		a.asks = append(asks, a.asks...)
		a.releases = append(releases, a.releases...)
		a.exclude = append(exclude, a.exclude...)
		a.mu.Unlock()
		var re *hadooprpc.RemoteError
		if errors.As(err, &re) && (re.Class == "org.apache.hadoop.yarn.exceptions.ApplicationAttemptNotFoundException" ||
			re.Class == "org.apache.hadoop.yarn.exceptions.ApplicationMasterNotRegisteredException" ||
			re.Class == "org.apache.hadoop.yarn.exceptions.InvalidApplicationMasterRequestException") {
			return errors.Join(ErrShutdown, err)
		}
		return err
	}
	// An unset command reads as its enum's first value: look at presence.
	if resp.AMCommand != nil {
		cmd := resp.GetAMCommand()
		return errors.Join(ErrShutdown, errors.New("allocate answered "+cmd.String()))
	}
	if t := resp.GetAmRmToken(); t != nil {
		// The ResourceManager rolled its master key: use the new token
		// from the next connection on.
		a.log.Info("amrm token rolled")
		if err := a.dialRM(hadooprpc.TokenFromProto(t)); err != nil {
			return err
		}
	}
	var completed []outcomeFor
	a.mu.Lock()
	a.responseID = resp.GetResponseId()
	if l := resp.GetLimit(); l != nil {
		a.headroom = l
	}
	for _, t := range resp.GetNmTokens() {
		a.nmTokens[nodeAddr(t.GetNodeId())] = hadooprpc.TokenFromProto(t.GetToken())
	}
	for _, c := range resp.GetAllocatedContainers() {
		a.place(c)
	}
	for _, st := range resp.GetCompletedContainerStatuses() {
		if o, ok := a.completedLocked(st); ok {
			completed = append(completed, o)
		}
	}
	a.mu.Unlock()
	for _, o := range completed {
		a.log.Info("container completed", "executor", o.id, "exit_status", o.exitStatus, "reason", o.message)
		a.emit(o.event(time.Now()))
	}
	return nil
}

// place gives an allocated container to the pending gang, or releases it.
// The executor whose input is on the container's node gets it, else one
// whose input is on its rack, else the one that has waited longest (see
// waitList). Called with a.mu held.
func (a *Allocator) place(c *pb.ContainerProto) {
	g := a.gang
	p := c.GetPriority().GetPriority()
	if g == nil || g.waiting[p].len() == 0 {
		a.releases = append(a.releases, c.GetId())
		return
	}
	host := c.GetNodeId().GetHost()
	keys := []string{hostKey(host)}
	if r := a.cfg.Racks[host]; r != "" {
		keys = append(keys, rackKey(r))
	}
	i, _ := g.waiting[p].take(keys...)
	g.held[i] = c
	g.heldBy[client.ContainerString(c.GetId())] = i
	if len(g.held) == len(g.specs) {
		close(g.ready)
	}
}

type outcomeFor struct {
	outcome
	id, host   string
	exitStatus int32
}

// event is the executor event of a completed container. Losses YARN
// caused (preemption, a lost node, failed disks) are blameless: the
// driver's failure policy does not count them against the job.
func (o outcomeFor) event(at time.Time) driver.Event {
	return driver.Event{ExecutorID: o.id, Kind: o.kind, Host: o.host, ExitCode: o.exitCode, Message: o.message,
		Blameless: o.notJobsFault, Time: at}
}

// completedLocked handles a completed container. A container held for a
// pending gang goes back to the asks. Called with a.mu held.
func (a *Allocator) completedLocked(st *pb.ContainerStatusProto) (outcomeFor, bool) {
	cid := client.ContainerString(st.GetContainerId())
	if g := a.gang; g != nil {
		if i, ok := g.heldBy[cid]; ok {
			p := g.held[i].GetPriority().GetPriority()
			delete(g.held, i)
			delete(g.heldBy, cid)
			a.waitLocked(g, p, i)
			a.askLocked(g, p)
			return outcomeFor{}, false
		}
	}
	c, ok := a.byID[cid]
	if !ok {
		return outcomeFor{}, false
	}
	select {
	case <-c.done:
		return outcomeFor{}, false
	default:
		close(c.done)
	}
	delete(a.byID, cid)
	if a.byExec[c.spec.ID] == c {
		delete(a.byExec, c.spec.ID)
	}
	// The limit YARN enforces is the container's granted memory: the ask
	// rounded up to the scheduler's allocation increment.
	limitMB := ContainerMB(c.spec, a.cfg.MemoryOverheadMB)
	if granted := int(c.c.GetResource().GetMemory()); granted > 0 {
		limitMB = granted
	}
	o := describe(st, c.spec.ID, c.host, cid, limitMB, a.cfg.MemoryOverheadMB, c.spec.SharedMemoryMB)
	if c.released && (st.GetExitStatus() == ExitAborted || st.GetExitStatus() == ExitKilledByAM) {
		o = outcome{driver.ExecutorExited, -1, fmt.Sprintf("executor %s (container %s on %s) was stopped", c.spec.ID, cid, c.host), false}
	}
	return outcomeFor{outcome: o, id: c.spec.ID, host: c.host, exitStatus: st.GetExitStatus()}, true
}
