package driver

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// Every registration answer carries the whole cluster spec: a peer per
// rank. Encoded per answer, a gang of n costs the driver n encodings of n
// peers, and when the gang is complete all n answers, O(n²) bytes, wait in
// the connections' buffers at once (a 1,000-rank gang held 157 MB of them;
// docs/scale.md). The spec is the same for every rank, so the driver's
// control plane encodes it once and sends the same bytes in every answer,
// after the answer's own fields: protobuf reads fields in any order, and a
// repeated field's elements wherever they come.

// peersField is the field number of RegisterResponse.peers.
var peersField = (&driverpb.RegisterResponse{}).ProtoReflect().Descriptor().Fields().ByName("peers").Number()

// specCodec is the control plane's protobuf codec, with the cluster spec
// of registration answers encoded once.
type specCodec struct {
	proto encoding.CodecV2

	mu sync.Mutex
	// spec is the encoding of the last peer list, the one whose backing
	// array starts at key with n elements. The roster never changes a
	// published list in place (a replacement gets a new one), so the
	// array's address and length name its contents.
	key  **driverpb.Peer
	n    int
	spec []byte
}

var _ encoding.CodecV2 = (*specCodec)(nil)

func newSpecCodec() *specCodec { return &specCodec{proto: encoding.GetCodecV2("proto")} }

// serverOption installs the codec on a control-plane server.
func (c *specCodec) serverOption() grpc.ServerOption { return grpc.ForceServerCodecV2(c) }

// Name is protobuf's: on the wire nothing changes.
func (c *specCodec) Name() string { return "proto" }

// Unmarshal decodes as protobuf does.
func (c *specCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// Marshal encodes a registration answer as its own fields followed by the
// shared encoding of its peers; everything else as protobuf does.
func (c *specCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*driverpb.RegisterResponse)
	if !ok || len(r.GetPeers()) == 0 {
		return c.proto.Marshal(v)
	}
	peers := r.Peers
	spec, err := c.specOf(peers)
	if err != nil {
		return nil, err
	}
	// The answer belongs to this call alone; its peers are put back.
	r.Peers = nil
	own, err := proto.Marshal(r)
	r.Peers = peers
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(own), mem.SliceBuffer(spec)}, nil
}

// specOf returns the encoding of peers as the peers field of a RegisterResponse,
// from the cache when it is the last list encoded.
func (c *specCodec) specOf(peers []*driverpb.Peer) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == &peers[0] && c.n == len(peers) {
		return c.spec, nil
	}
	var spec []byte
	for _, p := range peers {
		b, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		spec = protowire.AppendTag(spec, peersField, protowire.BytesType)
		spec = protowire.AppendBytes(spec, b)
	}
	c.key, c.n, c.spec = &peers[0], len(peers), spec
	return spec, nil
}
