package auth

import (
	"context"
	"errors"
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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func mustSigner(t *testing.T, secret string) *Signer {
	t.Helper()
	s, err := NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	other := mustSigner(t, "fedcba9876543210fedc")
	body := []byte("digest of a request")
	token := func() string {
		tok, err := s.Token("/svc/Method", body)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if err := s.Verify("/svc/Method", body, token()); err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
	stale := mustSigner(t, "0123456789abcdef0123")
	stale.now = func() time.Time { return time.Now().Add(-2 * MaxSkew) }
	staleTok, _ := stale.Token("/svc/Method", body)
	used := token()
	if err := s.Verify("/svc/Method", body, used); err != nil {
		t.Fatal(err)
	}
	// A fresh token with its last character changed (to another one:
	// replacing it with itself would leave the token valid).
	tampered := token()
	last := tampered[len(tampered)-1]
	tampered = tampered[:len(tampered)-1] + map[bool]string{true: "1", false: "0"}[last == '0']

	for name, tc := range map[string]struct {
		method string
		digest []byte
		token  string
		want   error
	}{
		"missing":      {"/svc/Method", body, "", ErrMissingToken},
		"garbage":      {"/svc/Method", body, "not-a-token", ErrBadToken},
		"old layout":   {"/svc/Method", body, "v1.1.2.3", ErrBadToken},
		"other method": {"/svc/Other", body, token(), ErrBadSignature},
		"other body":   {"/svc/Method", []byte("another request"), token(), ErrBadSignature},
		"tampered":     {"/svc/Method", body, tampered, ErrBadSignature},
		"expired":      {"/svc/Method", body, staleTok, ErrExpired},
		"replayed":     {"/svc/Method", body, used, ErrReplayed},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Verify(tc.method, tc.digest, tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	if err := other.Verify("/svc/Method", body, token()); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("token verified under another secret: %v", err)
	}
	if strings.Contains(token(), "0123456789abcdef0123") {
		t.Fatal("token carries the secret")
	}
}

// TestNoncesForgetOnlyAfterTheWindow: a nonce stays known for at least
// twice MaxSkew, then the memory it takes is released.
func TestNoncesForgetOnlyAfterTheWindow(t *testing.T) {
	var n nonces
	t0 := time.Now()
	if !n.add("a", t0) || n.add("a", t0.Add(time.Second)) {
		t.Fatal("a nonce was accepted twice")
	}
	// One rotation later it is still known; two later it is gone.
	n.add("b", t0.Add(2*MaxSkew+time.Second))
	if n.add("a", t0.Add(2*MaxSkew+2*time.Second)) {
		t.Fatal("a nonce was forgotten within the window")
	}
	n.add("c", t0.Add(4*MaxSkew+3*time.Second))
	if _, ok := n.old["a"]; ok {
		t.Fatal("an old generation was kept")
	}
}

func TestWeakSecret(t *testing.T) {
	if _, err := NewSigner("short"); !errors.Is(err, ErrWeakSecret) {
		t.Fatalf("err = %v", err)
	}
	secret, err := NewSecret()
	if err != nil || len(secret) < MinSecretLen {
		t.Fatalf("NewSecret = %q, %v", secret, err)
	}
}

// TestServerRefusesUnauthenticated runs a real gRPC server behind the
// interceptors and calls it with no, wrong and right credentials.
func TestServerRefusesUnauthenticated(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(s.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	call := func(opts ...grpc.DialOption) error {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
		conn, err := grpc.NewClient(lis.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := call(); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no credentials: %v", err)
	}
	if err := call(mustSigner(t, "wrong-secret-wrong-secret").DialOptions()...); status.Code(err) != codes.Unauthenticated {
		t.Errorf("wrong secret: %v", err)
	}
	if err := call(s.DialOptions()...); err != nil {
		t.Errorf("right secret: %v", err)
	}
}

// TestCapturedTokenCannotBeReplayed captures the token of a real call on
// the server side, as anyone seeing plain-text gRPC could, and replays it
// with another request and with the same request: both are refused.
func TestCapturedTokenCannotBeReplayed(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	captured := make(chan string, 1)
	spy := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(metadataKey); len(v) > 0 {
			select {
			case captured <- v[0]:
			default:
			}
		}
		return h(ctx, req)
	})
	srv := grpc.NewServer(append([]grpc.ServerOption{spy}, s.ServerOptions()...)...)
	hs := health.NewServer()
	hs.SetServingStatus("launch", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	defer srv.Stop()

	dial := func(opts ...grpc.DialOption) healthpb.HealthClient {
		conn, err := grpc.NewClient(lis.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return healthpb.NewHealthClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	if _, err := dial(s.DialOptions()...).Check(ctx, &healthpb.HealthCheckRequest{Service: "launch"}); err != nil {
		t.Fatalf("the genuine call: %v", err)
	}
	tok := <-captured

	attacker := dial()
	with := metadata.AppendToOutgoingContext(ctx, metadataKey, tok)
	if _, err := attacker.Check(with, &healthpb.HealthCheckRequest{Service: "something else"}); status.Code(err) != codes.Unauthenticated ||
		!strings.Contains(err.Error(), ErrBadSignature.Error()) {
		t.Errorf("replayed with another request: %v, want refused as not matching", err)
	}
	if _, err := attacker.Check(with, &healthpb.HealthCheckRequest{Service: "launch"}); status.Code(err) != codes.Unauthenticated ||
		!strings.Contains(err.Error(), ErrReplayed.Error()) {
		t.Errorf("replayed with the same request: %v, want refused as already used", err)
	}
}

// TestDeriveToken: a derived token depends on the secret and the purpose,
// is the same every time, and does not contain the secret.
func TestDeriveToken(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	base := DeriveToken(secret, "flight-put/producer/job-1")
	for _, tc := range []struct {
		name            string
		secret, purpose string
		same            bool
	}{
		{"again", secret, "flight-put/producer/job-1", true},
		{"another purpose", secret, "flight-put/feed/job-1", false},
		{"another job", secret, "flight-put/producer/job-2", false},
		{"another secret", secret + "x", "flight-put/producer/job-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeriveToken(tc.secret, tc.purpose); (got == base) != tc.same {
				t.Fatalf("token %s, first %s: want same=%v", got, base, tc.same)
			}
		})
	}
	if len(base) != 64 || strings.Contains(base, secret) {
		t.Fatalf("token %q", base)
	}
}
