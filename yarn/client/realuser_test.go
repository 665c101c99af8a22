package client_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/testbed/yarntest"
	"github.com/spindle-ml/spindle/yarn/client"
)

// TestConnectionContextWithOnlyRealUser: a client whose connection
// context names only a real user (hortonworks/gohadoop's YARN client does
// so) is that user, to the real ResourceManager and to the test one alike.
func TestConnectionContextWithOnlyRealUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"test yarn", func(t *testing.T) string { return yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 1}).Addr() }},
		{"real hadoop", func(t *testing.T) string { return hadooptest.Shared(t).Props["yarn.resourcemanager.address"] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := clusterMetricsAsRealUser(tc.addr(t), "alice"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// clusterMetricsAsRealUser calls getClusterMetrics over a connection
// whose context's user information carries only real_user, framed by
// hand from Hadoop's published RPC protocol.
func clusterMetricsAsRealUser(addr, user string) error {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testutil.Scale(30 * time.Second)))
	// "hrpc", version 9, service class 0, no SASL.
	if _, err := conn.Write([]byte{'h', 'r', 'p', 'c', 9, 0, 0}); err != nil {
		return err
	}
	clientID := make([]byte, 16)
	header := func(id int32) *pb.RpcRequestHeaderProto {
		return &pb.RpcRequestHeaderProto{RpcKind: pb.RpcKindProto_RPC_PROTOCOL_BUFFER.Enum(),
			RpcOp: pb.RpcRequestHeaderProto_RPC_FINAL_PACKET.Enum(), CallId: proto.Int32(id), ClientId: clientID, RetryCount: proto.Int32(-1)}
	}
	ctxMsg := &pb.IpcConnectionContextProto{Protocol: proto.String(client.ProtocolName),
		UserInfo: &pb.UserInformationProto{RealUser: proto.String(user)}}
	if err := writePacket(conn, header(-3), ctxMsg); err != nil {
		return err
	}
	req := &pb.RequestHeaderProto{MethodName: proto.String("getClusterMetrics"),
		DeclaringClassProtocolName: proto.String(client.ProtocolName), ClientProtocolVersion: proto.Uint64(1)}
	if err := writePacket(conn, header(0), req, &pb.GetClusterMetricsRequestProto{}); err != nil {
		return err
	}
	var n uint32
	br := bufio.NewReader(conn)
	if err := binary.Read(br, binary.BigEndian, &n); err != nil {
		return fmt.Errorf("read the response: %w", err)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return fmt.Errorf("read the response: %w", err)
	}
	var rh pb.RpcResponseHeaderProto
	rest, err := unmarshalDelimited(body, &rh)
	if err != nil {
		return err
	}
	if rh.GetStatus() != pb.RpcResponseHeaderProto_SUCCESS {
		return fmt.Errorf("refused: %s: %s", rh.GetExceptionClassName(), rh.GetErrorMsg())
	}
	var resp pb.GetClusterMetricsResponseProto
	if _, err := unmarshalDelimited(rest, &resp); err != nil {
		return err
	}
	if resp.GetClusterMetrics().GetNumNodeManagers() < 1 {
		return fmt.Errorf("cluster metrics count no NodeManager: %v", &resp)
	}
	return nil
}

func writePacket(w io.Writer, msgs ...proto.Message) error {
	var body []byte
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		body = protowire.AppendVarint(body, uint64(len(b)))
		body = append(body, b...)
	}
	pkt := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	_, err := w.Write(append(pkt, body...))
	return err
}

func unmarshalDelimited(b []byte, m proto.Message) ([]byte, error) {
	n, k := protowire.ConsumeVarint(b)
	if k < 0 || uint64(len(b)-k) < n {
		return nil, fmt.Errorf("bad delimited message")
	}
	return b[k+int(n):], proto.Unmarshal(b[k:k+int(n)], m)
}
