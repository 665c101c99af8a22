package scaletest

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

func TestRankOfReadsTheRankOnly(t *testing.T) {
	for _, rank := range []int32{0, 1, 7, 1999} {
		b, err := proto.Marshal(&driverpb.RegisterResponse{Rank: rank, WorldSize: 2000, LocalRank: 3,
			Peers: []*driverpb.Peer{{Rank: 5, Host: "h", Ports: []uint32{1}}}, Task: &driverpb.Task{Command: []string{"x"}}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := rankOf(b)
		if err != nil || got != rank {
			t.Errorf("rankOf(answer of rank %d) = %d, %v", rank, got, err)
		}
	}
	if _, err := rankOf([]byte{0xff}); err == nil {
		t.Error("rankOf accepted a malformed answer")
	}
}
