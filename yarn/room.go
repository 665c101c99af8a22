package yarn

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/yarn/am"
)

// Room says how many more executors of spec YARN could start now: the
// containers of its size (its memory with the overhead, its cores) that
// fit in what each RUNNING NodeManager has free, leaving out the hosts the
// spec excludes, and no more than the job's queue has available. An
// elastic job that runs smaller than it may asks it whether to grow.
func (c *ClusterManager) Room(ctx context.Context, spec driver.ExecutorSpec) (int, error) {
	nodes, err := c.rm.Nodes(ctx)
	if err != nil {
		return 0, fmt.Errorf("yarn: list the NodeManagers: %w", err)
	}
	q, err := c.rm.QueueInfo(ctx, c.cfg.Queue)
	if err != nil {
		return 0, fmt.Errorf("yarn: queue %s: %w", c.cfg.Queue, err)
	}
	return roomFor(am.ContainerMB(spec, c.cfg.MemoryOverheadMB), max(spec.Cores, 1), spec.ExcludedHosts, nodes, q), nil
}

// roomFor counts the containers of memMB and cores that fit on nodes,
// within the queue q's available resources when it reports them.
func roomFor(memMB, cores int, excluded []string, nodes []*pb.NodeReportProto, q *pb.QueueInfoProto) int {
	if memMB < 1 {
		return 0
	}
	n := 0
	for _, nr := range nodes {
		if nr.GetNodeState() != pb.NodeStateProto_NS_RUNNING {
			continue
		}
		host := nr.GetNodeId().GetHost()
		addr := net.JoinHostPort(host, fmt.Sprint(nr.GetNodeId().GetPort()))
		if slices.Contains(excluded, host) || slices.Contains(excluded, addr) {
			continue
		}
		freeMem := nr.GetCapability().GetMemory() - nr.GetUsed().GetMemory()
		freeCores := int64(nr.GetCapability().GetVirtualCores() - nr.GetUsed().GetVirtualCores())
		n += int(max(0, min(freeMem/int64(memMB), freeCores/int64(cores))))
	}
	if st := q.GetQueueStatistics(); st != nil {
		byMem := st.GetAvailableMemoryMB() / int64(memMB)
		if st.AvailableVCores != nil {
			byMem = min(byMem, st.GetAvailableVCores()/int64(cores))
		}
		n = min(n, int(max(0, byMem)))
	}
	return n
}
