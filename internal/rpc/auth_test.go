package rpc_test

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/peercred"
	"github.com/spindle-ml/spindle/internal/rpc"
)

// TestSchemesThroughTheChain: each credential scheme a Spindle server
// uses, passed to NewServer as options, refuses a caller without the
// job's secret before the handler runs, admits one with it, and the
// chain counts what the caller got. (Standalone's scheme is checked the
// same way in standalone/internal/secure.)
func TestSchemesThroughTheChain(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	signer, err := auth.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.NewSigner("fedcba9876543210fedcba9876543210")
	if err != nil {
		t.Fatal(err)
	}
	creds := func(token string) *peercred.Credentials {
		c, err := peercred.New(token, "test")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	plain := grpc.WithTransportCredentials(insecure.NewCredentials())
	for _, tc := range []struct {
		name     string
		server   []grpc.ServerOption
		good     []grpc.DialOption
		bad      [][]grpc.DialOption
		badCodes []codes.Code
	}{
		{
			name:     "per-call signatures (internal/auth: the driver's control plane)",
			server:   signer.ServerOptions(),
			good:     append(signer.DialOptions(), plain),
			bad:      [][]grpc.DialOption{{plain}, append(other.DialOptions(), plain)},
			badCodes: []codes.Code{codes.Unauthenticated, codes.Unauthenticated},
		},
		{
			name:     "peer credentials (internal/peercred: parameter servers)",
			server:   []grpc.ServerOption{grpc.Creds(creds(secret))},
			good:     []grpc.DialOption{grpc.WithTransportCredentials(creds(secret))},
			bad:      [][]grpc.DialOption{{plain}, {grpc.WithTransportCredentials(creds("fedcba9876543210fedcba9876543210"))}},
			badCodes: []codes.Code{codes.Unavailable, codes.Unavailable},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := rpc.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			h := &counting{Server: health.NewServer()}
			addr := serve(t, rpc.ServerConfig{Logger: slog.New(slog.DiscardHandler), Metrics: m, Options: tc.server}, h)
			for i, opts := range tc.bad {
				if code := check(t, addr, opts); code != tc.badCodes[i] {
					t.Errorf("caller %d without the secret: %v, want %v", i, code, tc.badCodes[i])
				}
			}
			if h.calls != 0 {
				t.Fatalf("the handler ran %d times for callers without the secret", h.calls)
			}
			if code := check(t, addr, tc.good); code != codes.OK || h.calls != 1 {
				t.Fatalf("the caller with the secret: %v, %d calls served", code, h.calls)
			}
			if n := served(t, reg, codes.OK); n != 1 {
				t.Errorf("%v admitted calls counted, want 1", n)
			}
			// A refusal in the handshake never becomes a call; one by an
			// interceptor is counted with the caller's code.
			if tc.badCodes[0] == codes.Unauthenticated {
				if n := served(t, reg, codes.Unauthenticated); n != float64(len(tc.bad)) {
					t.Errorf("%v refused calls counted, want %d", n, len(tc.bad))
				}
			}
		})
	}
}

// counting is a health service that counts the checks it serves.
type counting struct {
	*health.Server
	calls int
}

func (c *counting) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	c.calls++
	return c.Server.Check(ctx, r)
}

// serve serves h through rpc.NewServer(cfg) on loopback for the test.
func serve(t *testing.T, cfg rpc.ServerConfig, h healthpb.HealthServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(cfg)
	healthpb.RegisterHealthServer(srv, h)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String()
}

// check makes one health check of addr with opts and returns its code.
func check(t *testing.T, addr string, opts []grpc.DialOption) codes.Code {
	t.Helper()
	conn, err := rpc.NewClient(addr, rpc.ClientConfig{Logger: slog.New(slog.DiscardHandler), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	return status.Code(err)
}

// served returns the calls of code the registry's server counter holds.
func served(t *testing.T, reg *prometheus.Registry, code codes.Code) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "spindle_grpc_server_handled_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code.String() {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
