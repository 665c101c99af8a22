package auth

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// swapRequest is what an attacker on the path does to a stream it lets
// through: it keeps the stream's headers (and its token) and puts
// another request in.
type swapRequest struct {
	grpc.ClientStream
	with proto.Message
}

func (s swapRequest) SendMsg(any) error { return s.ClientStream.SendMsg(s.with) }

// TestServerStreamTokenCoversRequest: a server stream (health's Watch,
// shaped like FetchFile and WatchApp) signed by the client opens for its
// own request, and is refused when its request is swapped on the way, or
// when it carries no token; the handler acts on neither.
func TestServerStreamTokenCoversRequest(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(s.ServerOptions()...)
	hs := health.NewServer()
	hs.SetServingStatus("launch", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("other", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		<-done
	}()

	watch := func(req string, opts ...grpc.DialOption) (*healthpb.HealthCheckResponse, error) {
		t.Helper()
		conn, err := grpc.NewClient(lis.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
		defer cancel()
		st, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: req})
		if err != nil {
			return nil, err
		}
		return st.Recv()
	}
	if resp, err := watch("launch", s.DialOptions()...); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the genuine stream: %v, %v", resp, err)
	}
	swap := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		return swapRequest{ClientStream: cs, with: &healthpb.HealthCheckRequest{Service: "other"}}, err
	})
	// The signer's interceptor runs first, so the swap happens after the
	// request was signed: on the wire.
	resp, err := watch("launch", append(s.DialOptions(), swap)...)
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), ErrBadSignature.Error()) {
		t.Fatalf("a stream whose request was swapped on the way: %v, %v; want refused as not matching", resp, err)
	}
	if resp, err := watch("launch"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a stream without a token: %v, %v", resp, err)
	}
}
