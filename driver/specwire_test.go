package driver

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

func specPeers(n int) []*driverpb.Peer {
	peers := make([]*driverpb.Peer, n)
	for i := range peers {
		peers[i] = &driverpb.Peer{Rank: int32(i), Host: fmt.Sprintf("worker-%04d.example.com", i/8), Ports: []uint32{40000, 40001},
			ExecutorId: fmt.Sprintf("exec-%d", i), Role: "worker", RoleRank: int32(i)}
	}
	return peers
}

// The answers decode to what they were, whatever the codec did.
func TestSpecCodecAnswersDecodeWhole(t *testing.T) {
	c := newSpecCodec()
	peers := specPeers(50)
	for rank := range []int{0, 1, 49} {
		want := &driverpb.RegisterResponse{Rank: int32(rank), WorldSize: 50, LocalRank: int32(rank % 8), LocalWorldSize: 8, Peers: peers,
			Task: &driverpb.Task{Command: []string{"train"}}, Credentials: &driverpb.Credentials{Generation: 3, File: []byte("tokens")}}
		sent := proto.Clone(want).(*driverpb.RegisterResponse)
		sent.Peers = peers
		out, err := c.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sent.Peers, peers) {
			t.Fatal("Marshal did not put the answer's peers back")
		}
		got := &driverpb.RegisterResponse{}
		if err := proto.Unmarshal(out.Materialize(), got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("rank %d: decoded %v, want %v", rank, got, want)
		}
	}
	// Other messages are plain protobuf.
	out, err := c.Marshal(&driverpb.HeartbeatResponse{Stop: true, Reason: "done"})
	if err != nil {
		t.Fatal(err)
	}
	var hb driverpb.HeartbeatResponse
	if err := proto.Unmarshal(out.Materialize(), &hb); err != nil || !hb.Stop || hb.Reason != "done" {
		t.Errorf("heartbeat answer decoded as %v, %v", &hb, err)
	}
}

// The spec is encoded once and every answer shares its bytes; a new list
// (a replacement's) is encoded afresh.
func TestSpecCodecSharesTheSpec(t *testing.T) {
	c := newSpecCodec()
	peers := specPeers(2000)
	specBytes := func(r *driverpb.RegisterResponse) []byte {
		t.Helper()
		out, err := c.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 2 {
			t.Fatalf("answer encoded as %d buffers, want its own fields and the shared spec", len(out))
		}
		return out[1].ReadOnlyData()
	}
	a := specBytes(&driverpb.RegisterResponse{Rank: 1, Peers: peers})
	b := specBytes(&driverpb.RegisterResponse{Rank: 2, Peers: peers})
	if &a[0] != &b[0] {
		t.Error("two answers of one gang encoded the cluster spec twice")
	}
	replaced := slices.Clone(peers)
	replaced[7] = &driverpb.Peer{Rank: 7, Host: "new-host", Ports: []uint32{1}}
	got := &driverpb.RegisterResponse{}
	out, err := c.Marshal(&driverpb.RegisterResponse{Rank: 7, Peers: replaced})
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(out.Materialize(), got); err != nil {
		t.Fatal(err)
	}
	if got.Peers[7].GetHost() != "new-host" {
		t.Errorf("a replacement's spec came from the cache: rank 7 on %s", got.Peers[7].GetHost())
	}
}
