package auth

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
	tok, err := s.Token("/svc/Method")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify("/svc/Method", tok); err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
	stale := mustSigner(t, "0123456789abcdef0123")
	stale.now = func() time.Time { return time.Now().Add(-2 * MaxSkew) }
	staleTok, _ := stale.Token("/svc/Method")

	for name, tc := range map[string]struct {
		method, token string
		want          error
	}{
		"missing":      {"/svc/Method", "", ErrMissingToken},
		"garbage":      {"/svc/Method", "not-a-token", ErrBadToken},
		"other method": {"/svc/Other", tok, ErrBadSignature},
		"tampered":     {"/svc/Method", tok[:len(tok)-1] + "0", ErrBadSignature},
		"expired":      {"/svc/Method", staleTok, ErrExpired},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Verify(tc.method, tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	if err := other.Verify("/svc/Method", tok); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("token verified under another secret: %v", err)
	}
	if strings.Contains(tok, "0123456789abcdef0123") {
		t.Fatal("token carries the secret")
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := call(); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no credentials: %v", err)
	}
	if err := call(mustSigner(t, "wrong-secret-wrong-secret").DialOption()); status.Code(err) != codes.Unauthenticated {
		t.Errorf("wrong secret: %v", err)
	}
	if err := call(s.DialOption()); err != nil {
		t.Errorf("right secret: %v", err)
	}
}
