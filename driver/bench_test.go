package driver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/tlsgen"
)

// newBenchGang returns a gang of n registered executors.
func newBenchRoster(b *testing.B, n int) (*roster, []string) {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("exec-%d", i)
	}
	g := newRoster(ids)
	for i, id := range ids {
		if _, err := g.register(&driverpb.RegisterRequest{ExecutorId: id, Host: fmt.Sprintf("h%d", i%64), Ports: []uint32{1, 2}}); err != nil {
			b.Fatal(err)
		}
	}
	return g, ids
}

// BenchmarkHeartbeat measures the driver's cost per heartbeat as the gang
// grows, in process: the handler alone, the handler behind authenticated
// gRPC over loopback, and the liveness sweep each tick runs. The per-
// heartbeat cost should stay flat from ten executors to thousands.
// grpc-tls is the gRPC case over the job's mutual TLS
// (spindle.job.tls.enabled).
func BenchmarkHeartbeat(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 5000} {
		b.Run(fmt.Sprintf("handler/executors=%d", n), func(b *testing.B) {
			g, ids := newBenchRoster(b, n)
			s := &controlServer{roster: g, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			ctx := context.Background()
			req := &driverpb.HeartbeatRequest{Progress: &driverpb.Progress{Rows: 1, Batches: 1}}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req.ExecutorId = ids[i%n]
				if _, err := s.Heartbeat(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("grpc/executors=%d", n), func(b *testing.B) {
			benchGRPCHeartbeats(b, n, false)
		})
		b.Run(fmt.Sprintf("grpc-tls/executors=%d", n), func(b *testing.B) {
			benchGRPCHeartbeats(b, n, true)
		})
		b.Run(fmt.Sprintf("sweep/executors=%d", n), func(b *testing.B) {
			g, _ := newBenchRoster(b, n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				g.checkHeartbeats(time.Hour)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/executor")
		})
	}
}

func benchGRPCHeartbeats(b *testing.B, n int, jobTLS bool) {
	g, ids := newBenchRoster(b, n)
	signer, err := auth.NewSigner("0123456789abcdef0123456789abcdef")
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	opts, creds := signer.ServerOptions(), insecure.NewCredentials()
	if jobTLS {
		jt, err := newJobTLS("bench")
		if err != nil {
			b.Fatal(err)
		}
		exec, err := tlsgen.ExecutorConfig(jt.bundle)
		if err != nil {
			b.Fatal(err)
		}
		opts, creds = append(opts, jt.serverOptions()...), credentials.NewTLS(exec)
	}
	srv := grpc.NewServer(opts...)
	driverpb.RegisterControlServer(srv, &controlServer{roster: g, logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), append(signer.DialOptions(), grpc.WithTransportCredentials(creds))...)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := driverpb.NewControlClient(conn)
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			req := &driverpb.HeartbeatRequest{ExecutorId: ids[i%n], Progress: &driverpb.Progress{Rows: int64(i)}}
			if _, err := client.Heartbeat(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRegisterGang is the driver's cost of one registration, and of
// its rank's place on its host, as gangs grow: it should not grow with
// the gang (make scale registers 2,000 executors).
func BenchmarkRegisterGang(b *testing.B) {
	for _, n := range []int{100, 2000, 10000} {
		b.Run(fmt.Sprintf("executors=%d", n), func(b *testing.B) {
			ids := make([]string, n)
			reqs := make([]*driverpb.RegisterRequest, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("exec-%d", i)
				reqs[i] = &driverpb.RegisterRequest{ExecutorId: ids[i], Host: fmt.Sprintf("h%d", i/8), Ports: []uint32{1, 2}}
			}
			b.ResetTimer()
			for range b.N / n {
				// As the control plane does: every executor registers, then
				// each call, answered once the gang is in, finds its rank's
				// place on its host.
				g := newRoster(ids)
				members := make([]*member, n)
				for i, req := range reqs {
					m, err := g.register(req)
					if err != nil {
						b.Fatal(err)
					}
					members[i] = m
				}
				for _, m := range members {
					g.localRanks(m)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(b.N/n*n, 1)), "ns/registration")
		})
	}
}
