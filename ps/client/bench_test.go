package client

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/internal/peercred"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/ps/server"
)

// rawServer answers a pull with as many bytes as the parameter server
// would, and a push with nothing, doing no work: the gRPC round trip of
// the same bytes over the same authenticated connections, the ceiling the
// parameter server is measured against.
type rawServer struct {
	pspb.UnimplementedParameterServerServer
	dim int
}

func (r rawServer) Pull(_ context.Context, req *pspb.PullRequest) (*pspb.PullResponse, error) {
	return &pspb.PullResponse{Values: make([]byte, len(req.Keys)/8*r.dim*4)}, nil
}

func (r rawServer) Push(context.Context, *pspb.PushRequest) (*pspb.PushResponse, error) {
	return &pspb.PushResponse{}, nil
}

func startRaw(b *testing.B, n, dim int) []pspb.ParameterServerClient {
	creds, _ := peercred.New(token, ps.Purpose)
	var stubs []pspb.ParameterServerClient
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		g := grpc.NewServer(grpc.Creds(creds), grpc.MaxRecvMsgSize(server.MaxMessageBytes), grpc.MaxSendMsgSize(server.MaxMessageBytes))
		pspb.RegisterParameterServerServer(g, rawServer{dim: dim})
		go g.Serve(ln)
		b.Cleanup(g.Stop)
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		stubs = append(stubs, pspb.NewParameterServerClient(conn))
	}
	return stubs
}

// BenchmarkPullPush measures pulls and pushes of batch keys of dim values
// through 1, 2 and 4 servers, beside the raw round trip of the same bytes
// (already split per server) measured in the same run: ratio_pull and
// ratio_push are the parameter server's share of that ceiling.
func BenchmarkPullPush(b *testing.B) {
	for _, servers := range []int{1, 2, 4} {
		for _, batch := range []int{1 << 10, 1 << 16} {
			for _, dim := range []int{8, 64} {
				b.Run(fmt.Sprintf("servers=%d/batch=%d/dim=%d", servers, batch, dim), func(b *testing.B) {
					benchPullPush(b, servers, batch, dim)
				})
			}
		}
	}
}

func benchPullPush(b *testing.B, servers, batch, dim int) {
	c := startCluster(b, clusterOpts{servers: servers, workers: 1, staleness: ps.Async})
	cl, err := New(Config{Servers: c.Addrs, Token: token, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.closeConns()
	ctx := context.Background()
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: uint32(dim), Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad}}); err != nil {
		b.Fatal(err)
	}
	// Keys spread over a table of a quarter million rows, created before
	// the clock starts: batches touch rows that exist, as in training
	// after the first steps.
	const space = 1 << 18
	for from := 0; from < space; from += 1 << 16 {
		warm := make([]uint64, 1<<16)
		for j := range warm {
			warm[j] = uint64(from + j)
		}
		if err := cl.Pull(ctx, "emb", warm, make([]float32, len(warm)*dim)); err != nil {
			b.Fatal(err)
		}
	}
	keys := make([]uint64, batch)
	rows := make([]float32, batch*dim)
	grads := make([]float32, batch*dim)
	for i := range grads {
		grads[i] = 0.01
	}
	raw := startRaw(b, servers, dim)
	parts := cl.split(cl.ring.Load(), &pspb.TableSpec{}, keys)
	var psPull, psPush, rawPull, rawPush time.Duration
	b.ResetTimer()
	for i := range b.N {
		for j := range keys {
			keys[j] = uint64((i*batch + j*7919) % space)
		}
		t0 := time.Now()
		if err := cl.Pull(ctx, "emb", keys, rows); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := cl.Push(ctx, "emb", keys, grads); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		parts = cl.split(cl.ring.Load(), &pspb.TableSpec{}, keys)
		t3 := time.Now()
		rawRound(b, raw, parts, dim, true)
		t4 := time.Now()
		rawRound(b, raw, parts, dim, false)
		t5 := time.Now()
		psPull += t1.Sub(t0)
		psPush += t2.Sub(t1)
		rawPull += t4.Sub(t3)
		rawPush += t5.Sub(t4)
	}
	b.StopTimer()
	keysPer := func(d time.Duration) float64 { return float64(b.N*batch) / d.Seconds() }
	b.ReportMetric(keysPer(psPull), "pull_keys/s")
	b.ReportMetric(keysPer(psPush), "push_keys/s")
	b.ReportMetric(keysPer(rawPull), "raw_pull_keys/s")
	b.ReportMetric(keysPer(rawPush), "raw_push_keys/s")
	b.ReportMetric(rawPull.Seconds()/psPull.Seconds(), "ratio_pull")
	b.ReportMetric(rawPush.Seconds()/psPush.Seconds(), "ratio_push")
}

// rawRound sends every server its part, at once, as a pull or a push.
func rawRound(b *testing.B, stubs []pspb.ParameterServerClient, parts []part, dim int, pull bool) {
	var g errgroup.Group
	for i, p := range parts {
		if len(p.keys) == 0 {
			continue
		}
		g.Go(func() error {
			if pull {
				resp, err := stubs[i].Pull(context.Background(), &pspb.PullRequest{Keys: ps.KeyBytes(p.keys)})
				if err == nil {
					_, err = ps.BytesFloats(resp.Values)
				}
				return err
			}
			g := make([]float32, len(p.keys)*dim)
			_, err := stubs[i].Push(context.Background(), &pspb.PushRequest{Keys: ps.KeyBytes(p.keys), Grads: ps.FloatBytes(g)})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReplication measures pushes of 16k keys (dim 8) through 3
// servers keeping 0, 1 and 2 backups of every row: what a replica costs.
func BenchmarkReplication(b *testing.B) {
	for _, replicas := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			c := startCluster(b, clusterOpts{servers: 3, workers: 1, staleness: ps.Async, replicas: replicas})
			cl, err := New(Config{Servers: c.Addrs, Token: token, Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.closeConns()
			ctx := context.Background()
			if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 8, Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad}}); err != nil {
				b.Fatal(err)
			}
			const batch = 1 << 14
			keys := make([]uint64, batch)
			grads := make([]float32, batch*8)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				for j := range keys {
					keys[j] = uint64((i*batch + j*7919) % (1 << 17))
				}
				if err := cl.Push(ctx, "emb", keys, grads); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "push_keys/s")
		})
	}
}

// BenchmarkRecovery measures, for a server cut off (its port and
// connections closed at once, as a SIGKILL does) while two workers push,
// the time from the cut to the first push that succeeds after its keys
// moved to their backups.
func BenchmarkRecovery(b *testing.B) {
	var total time.Duration
	for range b.N {
		c := startCluster(b, clusterOpts{servers: 3, workers: 1, staleness: ps.Async, replicas: 1})
		cl, err := New(Config{Servers: c.Addrs, Token: token, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 8}); err != nil {
			b.Fatal(err)
		}
		keys := make([]uint64, 4096)
		for j := range keys {
			keys[j] = uint64(j)
		}
		grads := make([]float32, len(keys)*8)
		// Rows on every server, with their backups.
		for range 3 {
			if err := cl.Push(ctx, "emb", keys, grads); err != nil {
				b.Fatal(err)
			}
		}
		cut := time.Now()
		c.Kill(1)
		if err := cl.Push(ctx, "emb", keys, grads); err != nil {
			b.Fatal(err)
		}
		total += time.Since(cut)
		cl.closeConns()
	}
	b.ReportMetric(total.Seconds()/float64(b.N)*1000, "ms_to_first_push")
}
