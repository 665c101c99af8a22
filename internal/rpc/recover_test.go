package rpc_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// panicky is a health service whose Check panics for one service name.
type panicky struct{ *health.Server }

func (p panicky) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if r.GetService() == "boom" {
		var none []int
		_ = none[len(r.GetService())] // out of range: a runtime panic
	}
	return p.Server.Check(ctx, r)
}

func (p panicky) Watch(r *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	if r.GetService() == "boom" {
		panic("stream boom")
	}
	return p.Server.Watch(r, s)
}

// TestPanicFailsTheCallOnly: a handler's panic, unary or streaming, fails
// its call with Internal and is logged; the server answers the next call.
func TestPanicFailsTheCallOnly(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv := rpc.NewServer(rpc.ServerConfig{Logger: log})
	healthpb.RegisterHealthServer(srv, panicky{health.NewServer()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() { srv.Stop(); <-done }()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := healthpb.NewHealthClient(cc)
	ctx := context.Background()
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "boom"}); status.Code(err) != codes.Internal {
		t.Fatalf("a panicking unary call: %v, want Internal", err)
	}
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{Service: "boom"})
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.Internal {
		t.Fatalf("a panicking stream: %v, want Internal", err)
	}
	if r, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the next call: %v %v", r, err)
	}
	if !strings.Contains(logs.String(), "panicked") || !strings.Contains(logs.String(), "stream boom") {
		t.Fatalf("the panics were not logged:\n%s", logs.String())
	}
}
