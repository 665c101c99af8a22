package yarn

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

func TestRoomFor(t *testing.T) {
	node := func(host string, state pb.NodeStateProto, capMB, usedMB int64, capVC, usedVC int32) *pb.NodeReportProto {
		return &pb.NodeReportProto{NodeId: &pb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(8041)}, NodeState: state.Enum(),
			Capability: &pb.ResourceProto{Memory: proto.Int64(capMB), VirtualCores: proto.Int32(capVC)},
			Used:       &pb.ResourceProto{Memory: proto.Int64(usedMB), VirtualCores: proto.Int32(usedVC)}}
	}
	queue := func(mem, vc int64) *pb.QueueInfoProto {
		return &pb.QueueInfoProto{QueueStatistics: &pb.QueueStatisticsProto{AvailableMemoryMB: proto.Int64(mem), AvailableVCores: proto.Int64(vc)}}
	}
	run := pb.NodeStateProto_NS_RUNNING
	tests := []struct {
		name       string
		mem, cores int
		excluded   []string
		nodes      []*pb.NodeReportProto
		q          *pb.QueueInfoProto
		want       int
	}{
		{name: "free memory per node", mem: 1024, cores: 1,
			nodes: []*pb.NodeReportProto{node("a", run, 8192, 6144, 8, 2), node("b", run, 8192, 7900, 8, 1)}, want: 2},
		{name: "cores bound", mem: 512, cores: 4,
			nodes: []*pb.NodeReportProto{node("a", run, 8192, 0, 8, 1)}, want: 1},
		{name: "lost and unhealthy nodes do not count", mem: 1024, cores: 1,
			nodes: []*pb.NodeReportProto{node("a", pb.NodeStateProto_NS_LOST, 8192, 0, 8, 0), node("b", pb.NodeStateProto_NS_UNHEALTHY, 8192, 0, 8, 0)}},
		{name: "excluded hosts", mem: 1024, cores: 1, excluded: []string{"a", "b:8041"},
			nodes: []*pb.NodeReportProto{node("a", run, 8192, 0, 8, 0), node("b", run, 8192, 0, 8, 0), node("c", run, 2048, 0, 8, 0)}, want: 2},
		{name: "the queue's room bounds it", mem: 1024, cores: 1, q: queue(1500, 100),
			nodes: []*pb.NodeReportProto{node("a", run, 8192, 0, 8, 0)}, want: 1},
		{name: "a full queue", mem: 1024, cores: 1, q: queue(0, 0),
			nodes: []*pb.NodeReportProto{node("a", run, 8192, 0, 8, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := roomFor(tt.mem, tt.cores, tt.excluded, tt.nodes, tt.q); got != tt.want {
				t.Errorf("roomFor = %d, want %d", got, tt.want)
			}
		})
	}
}
