package am

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

func TestHeadroomFits(t *testing.T) {
	res := func(mem int64, vc int32) *pb.ResourceProto {
		return &pb.ResourceProto{Memory: proto.Int64(mem), VirtualCores: proto.Int32(vc)}
	}
	tests := []struct {
		name       string
		h          *pb.ResourceProto
		mem, cores int
		want       int
	}{
		{name: "no answer yet", mem: 384, cores: 1},
		{name: "by memory", h: res(1000, 8), mem: 384, cores: 1, want: 2},
		{name: "by cores", h: res(8192, 3), mem: 384, cores: 2, want: 1},
		{name: "memory only", h: &pb.ResourceProto{Memory: proto.Int64(800)}, mem: 384, cores: 4, want: 2},
		{name: "none left", h: res(0, 0), mem: 384, cores: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := headroomFits(tt.h, tt.mem, tt.cores); got != tt.want {
				t.Errorf("headroomFits = %d, want %d", got, tt.want)
			}
		})
	}
}
