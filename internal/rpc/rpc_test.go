package rpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

var (
	errMissing = errors.New("test: no such thing")
	errStale   = errors.New("test: stale")
)

var testCodes = Codes{{errMissing, codes.NotFound}, {errStale, codes.FailedPrecondition}}

// checker is a health service whose Check fails as its service name says.
type checker struct {
	healthpb.UnimplementedHealthServer
}

func (checker) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	switch req.Service {
	case "missing":
		return nil, Errorf(errMissing, "no table %q", "emb")
	case "wrapped":
		return nil, errors.Join(errors.New("while looking"), errMissing)
	case "plain":
		return nil, errors.New("something else")
	case "panic":
		panic("handler bug")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestServerOptionsMapErrors: through a real server on loopback, a domain
// error of a known kind leaves with its kind's code and its own text, an
// error of no kind as gRPC makes it (Unknown), and a panic as Internal.
func TestServerOptionsMapErrors(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerConfig{Logger: slog.New(slog.DiscardHandler), Codes: testCodes})
	healthpb.RegisterHealthServer(srv, checker{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	for _, tc := range []struct {
		service string
		code    codes.Code
		msg     string
	}{
		{"missing", codes.NotFound, `no table "emb"`},
		{"wrapped", codes.NotFound, "while looking\ntest: no such thing"},
		{"plain", codes.Unknown, "something else"},
		{"panic", codes.Internal, "/grpc.health.v1.Health/Check: internal error (the server logged it)"},
		{"", codes.OK, ""},
	} {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{Service: tc.service})
		st, _ := status.FromError(err)
		if st.Code() != tc.code || st.Message() != tc.msg {
			t.Errorf("%q: %v %q, want %v %q", tc.service, st.Code(), st.Message(), tc.code, tc.msg)
		}
	}
}

// TestCodesRoundTrip: ToStatus and FromStatus carry a kind across the
// wire; context errors keep their codes; anything else is Internal.
func TestCodesRoundTrip(t *testing.T) {
	sent := testCodes.ToStatus(errors.Join(errStale, errors.New("ring 3")))
	if status.Code(sent) != codes.FailedPrecondition {
		t.Fatalf("ToStatus: %v", sent)
	}
	if got := testCodes.FromStatus(sent); !errors.Is(got, errStale) || status.Code(got) != codes.FailedPrecondition {
		t.Fatalf("FromStatus: %v", got)
	}
	if got := testCodes.ToStatus(context.DeadlineExceeded); status.Code(got) != codes.DeadlineExceeded {
		t.Fatalf("a deadline: %v", got)
	}
	if got := testCodes.ToStatus(errors.New("x")); status.Code(got) != codes.Internal {
		t.Fatalf("an error of no kind: %v", got)
	}
	if got := testCodes.ToStatus(nil); got != nil {
		t.Fatalf("nil: %v", got)
	}
	if err := Errorf(errMissing, "no %s", "row"); !errors.Is(err, errMissing) || err.Error() != "no row" {
		t.Fatalf("Errorf: %v", err)
	}
}
