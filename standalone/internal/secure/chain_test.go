package secure

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// A worker's credentials, passed to rpc.NewServer as options, refuse
// through the chain a caller without the cluster secret, one with another
// secret and one whose calls are meant for a master, and admit a caller
// with the secret that means this worker.
func TestCredentialsThroughTheChain(t *testing.T) {
	mine, err := New("cluster-secret-0123456789", TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := New("another-secret-0123456789", TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	srv := rpc.NewServer(rpc.ServerConfig{Logger: slog.New(slog.DiscardHandler), Options: mine.ServerOptionsAs(WorkerAudience(addr))})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()
	plain := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	for _, tc := range []struct {
		name string
		opts []grpc.DialOption
		want codes.Code
	}{
		{"no credentials", plain, codes.Unauthenticated},
		{"another secret", theirs.DialOptionsTo(WorkerAudience(addr)), codes.Unauthenticated},
		{"meant for a master", mine.DialOptionsTo(MasterAudience(addr)), codes.Unauthenticated},
		{"the secret, for this worker", mine.DialOptionsTo(WorkerAudience(addr)), codes.OK},
	} {
		conn, err := rpc.NewClient(addr, rpc.ClientConfig{Logger: slog.New(slog.DiscardHandler), Options: tc.opts})
		if err != nil {
			t.Fatal(err)
		}
		_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		conn.Close()
		if got := status.Code(err); got != tc.want {
			t.Errorf("%s: %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}
