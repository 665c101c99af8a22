package yarntest

import (
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/yarn/am"
	"github.com/spindle-ml/spindle/yarn/client"
)

// need is a container's size.
type need struct {
	mem    int64
	vcores int64
	gpus   int64
}

func needOf(r *pb.ResourceProto) need {
	n := need{mem: r.GetMemory(), vcores: int64(max(r.GetVirtualCores(), 1))}
	for _, ri := range r.GetResourceValueMap() {
		if ri.GetKey() == am.GPUResource {
			n.gpus = ri.GetValue()
		}
	}
	return n
}

// fitsLocked reports whether queue q has room for n. Called with c.mu held.
func (q *queue) fits(n need) bool {
	if q.cfg.MemoryMB > 0 && q.usedMB+n.mem > int64(q.cfg.MemoryMB) {
		return false
	}
	if q.cfg.VCores > 0 && q.usedVCores+n.vcores > int64(q.cfg.VCores) {
		return false
	}
	return true
}

// pickNodeLocked returns the running node with the most free memory that
// fits n and is not on a host in avoid, or nil. Called with c.mu held.
func (c *Cluster) pickNodeLocked(n need, avoid map[string]bool) *nodeManager {
	usable := func(nm *nodeManager) bool {
		return nm.state == pb.NodeStateProto_NS_RUNNING && nm.fits(n) && !avoid[nm.nodeID.GetHost()] && !c.spentLocked(nm)
	}
	if c.beating != nil {
		if usable(c.beating) {
			return c.beating
		}
		return nil
	}
	var best *nodeManager
	for _, nm := range c.nodes {
		if !usable(nm) {
			continue
		}
		if best == nil || nm.freeMB() > best.freeMB() {
			best = nm
		}
	}
	return best
}

// allocateLocked places a container of size r for a's current attempt, or
// returns nil when no node or the queue has no room. Called with c.mu held.
func (c *Cluster) allocateLocked(a *app, r *pb.ResourceProto, priority int32, isAM bool) *container {
	n := needOf(r)
	q := c.queues[a.queue]
	if q == nil || !q.fits(n) {
		return nil
	}
	var avoid map[string]bool
	if !isAM {
		avoid = a.blacklist
	}
	nm := c.pickNodeLocked(n, avoid)
	if nm == nil {
		return nil
	}
	a.nextSeq++
	id := &pb.ContainerIdProto{AppId: a.id, AppAttemptId: a.attemptID(), Id: proto.Int64(a.nextSeq)}
	ct := &container{
		id: id, idStr: client.ContainerString(id), app: a, attempt: a.attempt, node: nm, need: n,
		resource: proto.Clone(r).(*pb.ResourceProto), priority: priority, isAM: isAM, allocated: c.now(),
		done: make(chan struct{}),
	}
	nm.usedMB += n.mem
	nm.usedVCores += n.vcores
	nm.usedGPUs += n.gpus
	q.usedMB += n.mem
	q.usedVCores += n.vcores
	nm.containers[ct.idStr] = ct
	if c.granted != nil {
		c.granted[nm]++
	}
	return ct
}

// spentLocked says whether nm granted its share of this allocate call
// (Config.GrantsPerNode). Called with c.mu held.
func (c *Cluster) spentLocked(nm *nodeManager) bool {
	return c.granted != nil && c.granted[nm] >= c.cfg.GrantsPerNode
}

// placeAMsLocked allocates the AM container of every accepted application
// that has none, in submission order. Called with c.mu held.
func (c *Cluster) placeAMsLocked() []*container {
	if c.closed {
		return nil
	}
	var out []*container
	for _, a := range c.appsInOrderLocked() {
		if a.state != pb.YarnApplicationStateProto_ACCEPTED || a.amc != nil {
			continue
		}
		ct := c.allocateLocked(a, a.sc.GetResource(), 0, true)
		if ct == nil {
			continue
		}
		a.amc = ct
		out = append(out, ct)
	}
	return out
}

func (c *Cluster) appsInOrderLocked() []*app {
	out := make([]*app, 0, len(c.apps))
	for _, a := range c.apps {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id.GetId() < out[j].id.GetId() })
	return out
}

// scheduleLocked fills a's outstanding asks for any host ("*") as far as
// the nodes and its queue have room, lowest priority number first.
// Called with c.mu held.
func (c *Cluster) scheduleLocked(a *app) {
	if c.cfg.NodeHeartbeat > 0 {
		return // the nodes grant on their heartbeats (heartbeatLoop)
	}
	if c.cfg.GrantsPerNode > 0 {
		c.granted = map[*nodeManager]int{}
		defer func() { c.granted = nil }()
	}
	c.fillAsksLocked(a)
}

// fillAsksLocked grants a's outstanding asks for any host ("*") as far as
// the nodes that may grant and its queue have room, lowest priority number
// first. Called with c.mu held.
func (c *Cluster) fillAsksLocked(a *app) {
	keys := make([]askKey, 0, len(a.asks))
	for k := range a.asks {
		if k.resource == "*" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].priority < keys[j].priority })
	for _, k := range keys {
		ask := a.asks[k]
		for ask.GetNumContainers() > 0 {
			ct := c.allocateLocked(a, ask.GetCapability(), k.priority, false)
			if ct == nil {
				break
			}
			ask.NumContainers = proto.Int32(ask.GetNumContainers() - 1)
			a.containers[ct.idStr] = ct
			a.allocated = append(a.allocated, ct)
		}
	}
}

// pendingLocked sums the outstanding asks of a queue's applications.
// Called with c.mu held.
func (c *Cluster) pendingLocked(queue string) need {
	var p need
	for _, a := range c.apps {
		if a.queue != queue || a.ended() {
			continue
		}
		for k, ask := range a.asks {
			if k.resource != "*" {
				continue
			}
			n := needOf(ask.GetCapability())
			p.mem += n.mem * int64(ask.GetNumContainers())
			p.vcores += n.vcores * int64(ask.GetNumContainers())
		}
	}
	return p
}

// releaseResourcesLocked gives a completed container's resources back.
// Called with c.mu held.
func (c *Cluster) releaseResourcesLocked(ct *container) {
	nm := ct.node
	nm.usedMB -= ct.need.mem
	nm.usedVCores -= ct.need.vcores
	nm.usedGPUs -= ct.need.gpus
	if q := c.queues[ct.app.queue]; q != nil {
		q.usedMB -= ct.need.mem
		q.usedVCores -= ct.need.vcores
	}
	c.wake()
}

// heartbeatLoop runs the NodeManagers' heartbeats (Config.NodeHeartbeat):
// each node once a period, their phases spread evenly over it. A loop
// that falls behind (a busy machine) runs the heartbeats it owes at once.
func (c *Cluster) heartbeatLoop() {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	start, beats := time.Now(), int64(0)
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			if n := int64(len(c.nodes)); n > 0 {
				for due := int64(now.Sub(start)) * n / int64(c.cfg.NodeHeartbeat); beats < due; beats++ {
					c.heartbeatNodeLocked(c.nodes[beats%n])
				}
			}
			c.mu.Unlock()
		}
	}
}

// heartbeatNodeLocked is one heartbeat of node nm: it takes what it fits
// of the registered attempts' outstanding asks, in submission order, for
// their next allocate calls to hand out. Called with c.mu held.
func (c *Cluster) heartbeatNodeLocked(nm *nodeManager) {
	c.nodeBeats++
	c.beating = nm
	defer func() { c.beating = nil }()
	if c.cfg.GrantsPerNode > 0 {
		c.granted = map[*nodeManager]int{}
		defer func() { c.granted = nil }()
	}
	for _, a := range c.appsInOrderLocked() {
		if a.registered && !a.ended() {
			c.fillAsksLocked(a)
		}
	}
}

// NodeHeartbeats is how many NodeManager heartbeats the ResourceManager
// has answered (Config.NodeHeartbeat).
func (c *Cluster) NodeHeartbeats() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodeBeats
}
