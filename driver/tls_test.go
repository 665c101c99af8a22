package driver

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/internal/tlsgen"
)

// serveControl serves a one-executor control plane with opts until the
// test ends and returns its address and the log it writes.
func serveControl(t *testing.T, signer *auth.Signer, requireTLS bool, opts ...grpc.ServerOption) (string, *syncbuf.Buffer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	srv := grpc.NewServer(append(signer.ServerOptions(), opts...)...)
	driverpb.RegisterControlServer(srv, &controlServer{roster: newRoster([]string{"exec-0"}), requireTLS: requireTLS,
		tasks:  func(int) (*driverpb.Task, error) { return &driverpb.Task{}, nil },
		logger: slog.New(slog.NewTextHandler(&log, nil)), stop: make(chan struct{})})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	return lis.Addr().String(), &log
}

func registerOver(t *testing.T, addr string, signer *auth.Signer, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, append(signer.DialOptions(), grpc.WithTransportCredentials(creds))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	_, err = driverpb.NewControlClient(conn).Register(ctx, &driverpb.RegisterRequest{ExecutorId: "exec-0", Host: "127.0.0.1"})
	return err
}

// TestControlPlaneJobTLS: a driver with job TLS hands its executors a
// bundle (with the secret, in their secret environment) that registers
// over mutual TLS, logged as such; a control server that requires TLS
// refuses a registration that came another way.
func TestControlPlaneJobTLS(t *testing.T) {
	secret, _ := auth.NewSecret()
	signer, err := auth.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	jt, err := newJobTLS("job-1")
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{secret: secret, tls: jt}
	env := d.executorEnv()
	if env[envcontract.JobSecret] != secret || env[envcontract.JobTLS] == "" {
		t.Fatalf("executor environment has %d entries, want the secret and the TLS bundle", len(env))
	}
	exec, err := tlsgen.ExecutorConfig(env[envcontract.JobTLS])
	if err != nil {
		t.Fatal(err)
	}

	t.Run("mutual TLS", func(t *testing.T) {
		addr, log := serveControl(t, signer, true, jt.serverOptions()...)
		if err := registerOver(t, addr, signer, credentials.NewTLS(exec)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log.String(), `transport="mutual TLS 1.3 (spindle-executor)"`) {
			t.Fatalf("registration not logged as mutual TLS:\n%s", log.String())
		}
	})
	t.Run("plain text where TLS is required", func(t *testing.T) {
		addr, _ := serveControl(t, signer, true)
		err := registerOver(t, addr, signer, insecure.NewCredentials())
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "not mutual TLS") {
			t.Fatalf("got %v, want Unauthenticated saying not mutual TLS", err)
		}
	})
	t.Run("without job TLS", func(t *testing.T) {
		plain := &Driver{secret: secret}
		if _, ok := plain.executorEnv()[envcontract.JobTLS]; ok || (*jobTLS)(nil).serverOptions() != nil {
			t.Fatal("a job without TLS hands out a bundle or serves TLS")
		}
		addr, log := serveControl(t, signer, false)
		if err := registerOver(t, addr, signer, insecure.NewCredentials()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log.String(), `transport="plain text"`) {
			t.Fatalf("registration not logged as plain text:\n%s", log.String())
		}
	})
}
