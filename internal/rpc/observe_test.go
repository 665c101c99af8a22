package rpc

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// serveChecker serves checker through NewServer(cfg) on loopback and
// returns a client made by NewClient(ccfg).
func serveChecker(t *testing.T, cfg ServerConfig, ccfg ClientConfig) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg)
	healthpb.RegisterHealthServer(srv, checker{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	ccfg.Options = append(ccfg.Options, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := NewClient(lis.Addr().String(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// TestChainCountsAndLogs: the server's and the client's chains count
// every call by method and code, and log a failed one with its method and
// code but never the call's metadata, where tokens travel.
func TestChainCountsAndLogs(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := serveChecker(t, ServerConfig{Logger: log, Codes: testCodes, Metrics: m}, ClientConfig{Logger: log, Metrics: m})
	const secret = "s3cret-token-value"
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+secret)
	for _, svc := range []string{"", "", "missing"} {
		_, _ = c.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	}
	const method = "/grpc.health.v1.Health/Check"
	for _, tc := range []struct {
		vec  *prometheus.CounterVec
		code codes.Code
		want float64
	}{
		{m.handled, codes.OK, 2}, {m.handled, codes.NotFound, 1},
		{m.sent, codes.OK, 2}, {m.sent, codes.NotFound, 1},
	} {
		if got := count(t, tc.vec.WithLabelValues(method, tc.code.String())); got != tc.want {
			t.Errorf("%s %v: counted %v, want %v", method, tc.code, got, tc.want)
		}
	}
	out := logged.String()
	if !strings.Contains(out, "grpc call refused or failed") || !strings.Contains(out, "code=NotFound") || !strings.Contains(out, "method="+method) {
		t.Errorf("the failure is not logged with its method and code:\n%s", out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the log holds the call's token:\n%s", out)
	}
}

// TestOtherwise: with Otherwise set, a handler's error of no kind leaves
// with that code (as the standalone API's were, Internal), while kinds
// keep theirs.
func TestOtherwise(t *testing.T) {
	c := serveChecker(t, ServerConfig{Logger: slog.New(slog.DiscardHandler), Codes: testCodes, Otherwise: codes.Internal}, ClientConfig{})
	for svc, want := range map[string]codes.Code{"plain": codes.Internal, "missing": codes.NotFound, "": codes.OK} {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if got := status.Code(err); got != want {
			t.Errorf("%q: %v, want %v", svc, got, want)
		}
	}
}

// count returns a counter's value.
func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
