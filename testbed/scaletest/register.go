package scaletest

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// A real executor decodes its registration answer, the whole cluster spec,
// on a machine of its own. The swarm answers for a thousand executors on
// one machine, so all but one of them read only their rank from the
// answer's bytes: what the swarm spends then does not grow with the square
// of the ranks and starve the driver it measures.

// rawAnswer holds a registration answer's bytes, undecoded.
type rawAnswer struct{ b []byte }

// rawCodec encodes requests as protobuf and keeps answers whole; its name
// is protobuf's, so the driver sees an ordinary call.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("scaletest: cannot encode %T", v)
	}
	return proto.Marshal(m)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	a, ok := v.(*rawAnswer)
	if !ok {
		return fmt.Errorf("scaletest: cannot decode into %T", v)
	}
	a.b = append(a.b[:0], data...)
	return nil
}

// registerRaw registers and returns the executor's rank, read from the
// answer's bytes.
func registerRaw(ctx context.Context, conn *grpc.ClientConn, req *driverpb.RegisterRequest) (int32, error) {
	var a rawAnswer
	if err := conn.Invoke(ctx, driverpb.Control_Register_FullMethodName, req, &a,
		grpc.ForceCodec(rawCodec{}), grpc.WaitForReady(true)); err != nil {
		return 0, err
	}
	return rankOf(a.b)
}

// rankOf reads field 1 (rank) of a RegisterResponse; proto3 leaves it out
// when it is 0.
func rankOf(b []byte) (int32, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, errors.New("scaletest: malformed registration answer")
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, errors.New("scaletest: malformed rank in the registration answer")
			}
			return int32(v), nil
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, errors.New("scaletest: malformed registration answer")
		}
		b = b[n:]
	}
	return 0, nil
}
