package yarntest

import (
	"fmt"
	"syscall"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/yarn/am"
)

// Faults on demand: what a real cluster does at moments a test cannot
// choose. Each ends containers the way the ResourceManager and
// NodeManagers report them, with YARN's exit statuses and diagnostics.

// runningLocked finds a container that is still running. Called with c.mu
// held.
func (c *Cluster) runningLocked(id string) (*container, error) {
	for _, n := range c.nodes {
		if ct, ok := n.containers[id]; ok {
			if ct.completed {
				return nil, fmt.Errorf("yarntest: container %s has completed", id)
			}
			return ct, nil
		}
	}
	return nil, fmt.Errorf("yarntest: no container %s", id)
}

// endContainer forces a running container's end with a YARN exit status.
func (c *Cluster) endContainer(id string, code int32, diag func(ct *container) string) error {
	c.mu.Lock()
	ct, err := c.runningLocked(id)
	if err == nil {
		ct.forceLocked(code, diag(ct))
		if !ct.started {
			// Allocated but never started: it ends where it is. A
			// container still localizing ends before its process starts.
			c.completeLocked(ct, code, ct.forced.diag)
		}
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	ct.signal(false)
	return nil
}

// Preempt takes a container back for another application, as the
// scheduler's preemption does: exit status -102.
func (c *Cluster) Preempt(id string) error {
	return c.endContainer(id, am.ExitPreempted, func(*container) string { return "Container preempted by scheduler" })
}

// KillForMemory kills a container as a NodeManager's memory monitor does
// for one over its limit: exit status -104 for physical memory, -103 for
// virtual.
func (c *Cluster) KillForMemory(id string, physical bool) error {
	code, kind, unit := int32(am.ExitKilledVMem), "VIRTUAL", "virtual"
	if physical {
		code, kind, unit = am.ExitKilledPMem, "PHYSICAL", "physical"
	}
	return c.endContainer(id, code, func(ct *container) string {
		limit := ct.need.mem
		pid := 0
		ct.pmu.Lock()
		if ct.proc != nil {
			pid = ct.proc.pid
		}
		ct.pmu.Unlock()
		return fmt.Sprintf("Container [pid=%d,containerID=%s] is running %dMB beyond the '%s' memory limit. Current usage: %d MB of %d MB %s memory used. Killing container.",
			pid, ct.idStr, limit/4, kind, limit+limit/4, limit, unit)
	})
}

// KillContainer kills a container's processes with SIGKILL behind YARN's
// back, as the kernel's OOM killer or an operator would: YARN reports the
// process's own exit status (137).
func (c *Cluster) KillContainer(id string) error {
	c.mu.Lock()
	ct, err := c.runningLocked(id)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	ct.pmu.Lock()
	p := ct.proc
	ct.pmu.Unlock()
	if p == nil {
		return fmt.Errorf("yarntest: container %s has no process yet", id)
	}
	return syscall.Kill(-p.pid, syscall.SIGKILL)
}

func (c *Cluster) nodeLocked(i int) (*nodeManager, error) {
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("yarntest: no NodeManager %d (have %d)", i, len(c.nodes))
	}
	return c.nodes[i], nil
}

// endNodeLocked ends every container of node n with code and tells every
// running application of the node's new state. Called with c.mu held.
func (c *Cluster) endNodeLocked(n *nodeManager, code int32, diag string) []*container {
	var stop []*container
	for _, ct := range n.containers {
		if ct.completed {
			continue
		}
		ct.forceLocked(code, diag)
		if !ct.started {
			c.completeLocked(ct, code, diag)
			continue
		}
		stop = append(stop, ct)
	}
	for _, a := range c.apps {
		if a.registered && !a.ended() {
			a.lostNodes = append(a.lostNodes, n)
		}
	}
	return stop
}

// LoseNode makes NodeManager i vanish, as a crashed machine does: its port
// closes, its containers die, and the ResourceManager reports them
// aborted (-100, "released on a *lost* node") and the node LOST.
func (c *Cluster) LoseNode(i int) error {
	c.mu.Lock()
	n, err := c.nodeLocked(i)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	n.state = pb.NodeStateProto_NS_LOST
	n.health = "node lost: no heartbeat"
	stop := c.endNodeLocked(n, am.ExitAborted, "Container released on a *lost* node")
	c.mu.Unlock()
	n.cancel()
	for _, ct := range stop {
		ct.signal(true)
	}
	c.log.Info("nodemanager lost", "node", n.addr)
	return nil
}

// FailDisks fails NodeManager i's local and log disks: the node turns
// UNHEALTHY, takes no more containers, and its containers end with -101.
func (c *Cluster) FailDisks(i int) error {
	c.mu.Lock()
	n, err := c.nodeLocked(i)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	n.state = pb.NodeStateProto_NS_UNHEALTHY
	n.health = "1/1 local-dirs have errors: [ " + n.dir + " ] ; 1/1 log-dirs have errors: [ " + n.dir + "/logs ]"
	stop := c.endNodeLocked(n, am.ExitDisksFailed, "Container exited because the disks of NodeManager "+n.addr+" failed: "+n.health)
	c.mu.Unlock()
	for _, ct := range stop {
		ct.signal(false)
	}
	return nil
}

// SetQueueLimit changes a queue's limits while the cluster runs (zero: the
// cluster's size). A limit below what its applications ask for is a queue
// that never has room.
func (c *Cluster) SetQueueLimit(name string, memoryMB, vcores int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.queues[name]
	if !ok {
		return fmt.Errorf("yarntest: no queue %s", name)
	}
	q.cfg.MemoryMB, q.cfg.VCores = memoryMB, vcores
	c.wake()
	return nil
}

// TokenKind names a kind of token for WrongTokens.
type TokenKind int

// The tokens the cluster issues.
const (
	// AMRMTokens are given to ApplicationMasters in their credentials.
	AMRMTokens TokenKind = iota
	// NMTokens are given to ApplicationMasters in allocate answers.
	NMTokens
)

// WrongTokens makes the cluster issue tokens of kind whose passwords do not
// match (on), or correct ones again (off): the ResourceManager's scheduler
// or the NodeManagers refuse them.
func (c *Cluster) WrongTokens(kind TokenKind, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch kind {
	case AMRMTokens:
		c.wrongAMRM = on
	case NMTokens:
		c.wrongNM = on
	}
}

// RollMasterKeys rolls the AMRMToken and NMToken master keys, as the
// ResourceManager does periodically: tokens of the old keys still work
// until ExpireOldKeys, and each ApplicationMaster gets new tokens in its
// next allocate answer.
func (c *Cluster) RollMasterKeys() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.amrmKeys.roll()
	c.nmKeys.roll()
}

// ExpireOldKeys forgets every master key but the current ones and drops
// every open scheduler and NodeManager connection, so tokens of older keys
// are refused from the next connection on.
func (c *Cluster) ExpireOldKeys() {
	c.mu.Lock()
	c.amrmKeys.dropOld()
	c.nmKeys.dropOld()
	nodes := append([]*nodeManager(nil), c.nodes...)
	c.mu.Unlock()
	c.schedSrv.CloseConnections()
	for _, n := range nodes {
		n.srv.CloseConnections()
	}
}
