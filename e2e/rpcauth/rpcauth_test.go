package rpcauth

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed/push"
	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/peercred"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/ps/server"
	"github.com/spindle-ml/spindle/standalone/master"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
	"github.com/spindle-ml/spindle/standalone/worker"
)

const (
	secret = "0123456789abcdef0123456789abcdef"
	wrong  = "fedcba9876543210fedcba9876543210"
)

// caller says which credentials a call carries.
type caller int

const (
	noCredentials caller = iota
	wrongSecret
	rightSecret
)

func (c caller) String() string {
	return [...]string{"no credentials", "wrong secret", "right secret"}[c]
}

// target is one running server: call makes one call as c and returns its
// error; ran reports whether anything of a refused call ran; refused is
// the code a caller without the secret gets; admits says whether the test
// knows the right secret (the driver's is made by the driver and handed
// to its executors only).
type target struct {
	call    func(ctx context.Context, t *testing.T, c caller) error
	ran     func(t *testing.T) bool
	refused codes.Code
	admits  bool
}

// TestEveryServerRefusesStrangers: each gRPC server of the product, built
// as the product builds it, refuses a call without credentials and one
// with a wrong secret (Unauthenticated; Unavailable for the parameter
// server, whose peer credentials refuse the connection's handshake, so
// there is no call to answer), and runs nothing of it; the right secret
// gets past authentication, so the refusal is not of everything.
func TestEveryServerRefusesStrangers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) target
	}{
		{"driver control plane", startDriver},
		{"parameter server", startPS},
		{"standalone master", startMaster},
		{"standalone worker", startWorker},
		{"flight push endpoint", startPush},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
			defer cancel()
			for _, c := range []caller{noCredentials, wrongSecret} {
				if err := tg.call(ctx, t, c); status.Code(err) != tg.refused {
					t.Errorf("%s: %v, want %v", c, err, tg.refused)
				}
			}
			if tg.ran(t) {
				t.Errorf("a call without the secret ran")
			}
			if !tg.admits {
				return
			}
			if err := tg.call(ctx, t, rightSecret); status.Code(err) == tg.refused {
				t.Errorf("%s: %v", rightSecret, err)
			}
		})
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// signed is the options of a caller signing as c with internal/auth for
// audience ("" for none).
func signed(t *testing.T, c caller, audience string) []grpc.DialOption {
	t.Helper()
	if c == noCredentials {
		return nil
	}
	s, err := auth.NewSigner(map[caller]string{wrongSecret: wrong, rightSecret: secret}[c])
	if err != nil {
		t.Fatal(err)
	}
	if audience != "" {
		s = s.For(audience)
	}
	return s.DialOptions()
}

// listening finds the driver's control-plane address in its log.
var listening = regexp.MustCompile(`msg="control plane listening".* addr=(\S+)`)

// startDriver runs a real driver on the local cluster manager, whose
// executor is a process that never registers, and calls its control
// plane's Register. (The right secret is the driver's own, handed to its
// executors only; the e2e tests register real executors with it.)
func startDriver(t *testing.T) target {
	dir := t.TempDir()
	exe := filepath.Join(dir, "executor")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cm, err := driver.NewLocal(driver.LocalConfig{Binary: exe, Dir: dir, Logger: log, StopGrace: time.Second,
		Console: driver.NewConsole(&logs, &logs, false)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := driver.DefaultConfig()
	cfg.NumExecutors, cfg.Command, cfg.Dir = 1, []string{"true"}, dir
	cfg.ListenHost, cfg.AdvertiseHost, cfg.Port = "127.0.0.1", "127.0.0.1", 0
	cfg.UIEnabled, cfg.Logger, cfg.Console = false, log, driver.NewConsole(&logs, &logs, false)
	d, err := driver.New(cfg, cm)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	var addr string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("driver's log:\n%s", logs.String())
		}
	})
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("the driver's control plane to listen", func() bool {
		m := listening.FindStringSubmatch(logs.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}))
	return target{
		refused: codes.Unauthenticated,
		call: func(ctx context.Context, t *testing.T, c caller) error {
			_, err := driverpb.NewControlClient(dial(t, addr, signed(t, c, "")...)).Register(ctx,
				&driverpb.RegisterRequest{ExecutorId: "exec-0", Host: "127.0.0.1"})
			return err
		},
		ran: func(*testing.T) bool { return strings.Contains(logs.String(), "executor registered") },
	}
}

// startPS serves a parameter server with its peer credentials and calls
// GetRing: the handshake refuses a caller without the job's token.
func startPS(t *testing.T) target {
	ln := listen(t)
	ring, err := ps.NewRing(1, []string{ln.Addr().String()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := peercred.New(secret, ps.Purpose)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Index: 0, Ring: ring, Workers: 1, PeerCreds: creds, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, creds) }()
	t.Cleanup(func() { cancel(); <-done })
	return target{
		refused: codes.Unavailable, admits: true,
		call: func(ctx context.Context, t *testing.T, c caller) error {
			opt := grpc.WithTransportCredentials(insecure.NewCredentials())
			if c != noCredentials {
				cc, err := peercred.New(map[caller]string{wrongSecret: wrong, rightSecret: secret}[c], ps.Purpose)
				if err != nil {
					t.Fatal(err)
				}
				opt = grpc.WithTransportCredentials(cc)
			}
			conn, err := grpc.NewClient(ln.Addr().String(), opt)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = pspb.NewParameterServerClient(conn).GetRing(ctx, &pspb.GetRingRequest{})
			return err
		},
		// A refused handshake leaves no call to run.
		ran: func(*testing.T) bool { return false },
	}
}

// startMaster runs a standalone master (a Raft group of one) and calls
// RegisterApp, signed for the master's own audience.
func startMaster(t *testing.T) target {
	c := master.DefaultConfig()
	c.ID, c.Addr, c.RaftAddr = "m1", testaddr.Free(t), testaddr.Free(t)
	c.Peers = []master.Peer{{ID: c.ID, Addr: c.Addr, RaftAddr: c.RaftAddr}}
	c.DataDir, c.Secret, c.Logger = t.TempDir(), secret, quiet()
	m, err := master.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := m.Addr()
	return target{
		refused: codes.Unauthenticated, admits: true,
		call: func(ctx context.Context, t *testing.T, c caller) error {
			mc := pb.NewMasterClient(dial(t, addr, signed(t, c, "spindle-master "+addr)...))
			if c == rightSecret {
				_, err := mc.MasterInfo(ctx, &pb.MasterInfoRequest{})
				return err
			}
			_, err := mc.RegisterApp(ctx, &pb.RegisterAppRequest{Name: "intruder"})
			return err
		},
		ran: func(t *testing.T) bool {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
			defer cancel()
			mc := pb.NewMasterClient(dial(t, addr, signed(t, rightSecret, "spindle-master "+addr)...))
			var st *pb.ClusterStatusResponse
			// The status waits for the group of one to elect its leader.
			testutil.WaitFor(t, 30*time.Second, testutil.Holds("the master's status", func() bool {
				var err error
				st, err = mc.ClusterStatus(ctx, &pb.ClusterStatusRequest{})
				return err == nil
			}))
			return len(st.GetApps()) != 0
		},
	}
}

// startWorker runs a standalone worker (its masters need not be up to
// serve) and calls Launch with a command that would leave a file behind,
// signed for the worker's own audience.
func startWorker(t *testing.T) target {
	dir := t.TempDir()
	c := worker.DefaultConfig()
	c.ID, c.Masters, c.Secret, c.Addr = "w1", []string{testaddr.Free(t)}, secret, "127.0.0.1:0"
	c.Cores, c.MemoryMB, c.Binary, c.WorkDir = 1, 64, "/bin/sh", filepath.Join(dir, "work")
	c.DisableCgroups, c.Logger = true, quiet()
	w, err := worker.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	marker := filepath.Join(dir, "pwned")
	return target{
		refused: codes.Unauthenticated, admits: true,
		call: func(ctx context.Context, t *testing.T, c caller) error {
			id := "w1"
			if c == rightSecret {
				id = "another-worker" // admitted, then refused as not this worker's
			}
			_, err := pb.NewWorkerClient(dial(t, w.Addr(), signed(t, c, "spindle-worker "+w.Addr())...)).Launch(ctx, &pb.LaunchRequest{
				WorkerId: id, AppId: "intruder", ExecutorId: "x", Args: []string{"-c", "touch " + marker}, Cores: 1, MemoryMb: 1})
			return err
		},
		ran: func(*testing.T) bool { _, err := os.Stat(marker); return err == nil },
	}
}

// startPush serves the Flight push endpoint as the driver does and calls
// DoPut with a batch: the producer token is the bearer token.
func startPush(t *testing.T) target {
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float32}}, nil)
	s, err := push.Start(listen(t), push.Config{Ranks: 1, BatchRows: 1, Schema: sc, Logger: quiet(),
		ProducerToken: push.ProducerToken(secret, "job-1"), FeedToken: "feed-token-of-the-job"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return target{
		refused: codes.Unauthenticated, admits: true,
		call: func(ctx context.Context, t *testing.T, c caller) error {
			if c != noCredentials {
				token := push.ProducerToken(map[caller]string{wrongSecret: wrong, rightSecret: secret}[c], "job-1")
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
			}
			fc := flight.NewClientFromConn(dial(t, s.Addr()), nil)
			stream, err := fc.DoPut(ctx)
			if err != nil {
				return err
			}
			if err := stream.CloseSend(); err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		},
		ran: func(*testing.T) bool { st := s.Stats(); return st.Streams != 0 || st.Rows != 0 },
	}
}
