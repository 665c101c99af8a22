package client

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/internal/peercred"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/internal/pstest"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/ps/server"
	"github.com/spindle-ml/spindle/rdma/ucx"
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
// through 1, 2 and 4 servers over each data link: gRPC (TCP), and, where
// this binary can use UCX, UCX on its TCP transport and on shared memory,
// each beside the raw round trip of the same bytes (already split per
// server) over the same link to servers that do no work, the ceiling.
// Every link is measured in the same loop, round after round, against the
// same servers: LINK_pull_keys/s and LINK_push_keys/s are the parameter
// server's, raw_LINK_* the ceiling's; ratio_LINK_* the parameter server's
// share of its link's ceiling, and LINK/grpc_* its speed against gRPC.
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

// benchLink is a data link under measurement: a client over it and the
// raw round trip over it.
type benchLink struct {
	name string
	cl   *Client
	raw  func(b *testing.B, parts []part, dim int, pull bool)
	// The time of each kind of call, and the process's CPU time in it
	// (client and servers together): under a loaded machine's scheduling
	// noise the CPU time is the steadier measure of the work each does.
	pull, push, rawPull, rawPush             time.Duration
	pullCPU, pushCPU, rawPullCPU, rawPushCPU time.Duration
}

// benchLinks are the links measured: gRPC always, UCX's TCP and shared
// memory transports where this binary can use UCX.
func benchLinks(b *testing.B, c *cluster, servers, dim int) []*benchLink {
	grpcRaw := startRaw(b, servers, dim)
	links := []*benchLink{{name: "grpc", raw: func(b *testing.B, parts []part, dim int, pull bool) {
		rawRound(b, grpcRaw, parts, dim, pull)
	}}}
	if ok, why := ucx.Available(); !ok {
		b.Logf("UCX links not measured: %s", why)
	} else {
		rawAddrs := startRawUCX(b, servers, dim)
		for _, tls := range []string{"tcp", "sm"} {
			// UCX reads UCX_TLS when a worker starts: the client's and
			// the raw caller's start here.
			b.Setenv("UCX_TLS", tls)
			links = append(links, &benchLink{name: "ucx" + tls, raw: rawUCXCaller(b, rawAddrs)})
		}
	}
	for _, l := range links {
		link := ""
		if l.name != "grpc" {
			link = "ucx:required"
			b.Setenv("UCX_TLS", strings.TrimPrefix(l.name, "ucx"))
		}
		cl, err := New(Config{Servers: c.Addrs, Token: token, DataLink: link, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.closeConns)
		l.cl = cl
	}
	return links
}

func benchPullPush(b *testing.B, servers, batch, dim int) {
	b.Setenv("UCX_LOG_LEVEL", "fatal")
	// The servers' UCX workers take both transports: each client picks
	// its own.
	b.Setenv("UCX_TLS", "tcp,sm")
	link := ""
	if ok, _ := ucx.Available(); ok {
		link = "ucx"
	}
	c := &cluster{pstest.Start(b, pstest.Options{Servers: servers, Workers: 1, Token: token, Staleness: ps.Async, DataLink: link})}
	links := benchLinks(b, c, servers, dim)
	ctx := context.Background()
	spec := &ps.TableSpec{Name: "emb", Dim: uint32(dim), Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad}}
	for _, l := range links {
		if err := l.cl.Declare(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	cl := links[0].cl
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
	// Every link's first calls open its sessions: before the clock starts.
	for _, l := range links {
		if err := l.cl.Pull(ctx, "emb", keys, rows); err != nil {
			b.Fatalf("%s: %v", l.name, err)
		}
		l.raw(b, cl.split(cl.ring.Load(), &pspb.TableSpec{}, keys), dim, true)
	}
	b.ResetTimer()
	for i := range b.N {
		for j := range keys {
			keys[j] = uint64((i*batch + j*7919) % space)
		}
		parts := cl.split(cl.ring.Load(), &pspb.TableSpec{}, keys)
		for _, l := range links {
			t0, c0 := time.Now(), cpuTime()
			if err := l.cl.Pull(ctx, "emb", keys, rows); err != nil {
				b.Fatalf("%s: %v", l.name, err)
			}
			t1, c1 := time.Now(), cpuTime()
			if err := l.cl.Push(ctx, "emb", keys, grads); err != nil {
				b.Fatalf("%s: %v", l.name, err)
			}
			t2, c2 := time.Now(), cpuTime()
			l.raw(b, parts, dim, true)
			t3, c3 := time.Now(), cpuTime()
			l.raw(b, parts, dim, false)
			t4, c4 := time.Now(), cpuTime()
			l.pull += t1.Sub(t0)
			l.push += t2.Sub(t1)
			l.rawPull += t3.Sub(t2)
			l.rawPush += t4.Sub(t3)
			l.pullCPU += c1 - c0
			l.pushCPU += c2 - c1
			l.rawPullCPU += c3 - c2
			l.rawPushCPU += c4 - c3
		}
	}
	b.StopTimer()
	keysPer := func(d time.Duration) float64 { return float64(b.N*batch) / d.Seconds() }
	for _, l := range links {
		b.ReportMetric(keysPer(l.pull), l.name+"_pull_keys/s")
		b.ReportMetric(keysPer(l.push), l.name+"_push_keys/s")
		b.ReportMetric(keysPer(l.rawPull), "raw_"+l.name+"_pull_keys/s")
		b.ReportMetric(keysPer(l.rawPush), "raw_"+l.name+"_push_keys/s")
		b.ReportMetric(l.rawPull.Seconds()/l.pull.Seconds(), "ratio_"+l.name+"_pull")
		b.ReportMetric(l.rawPush.Seconds()/l.push.Seconds(), "ratio_"+l.name+"_push")
		b.ReportMetric(l.rawPullCPU.Seconds()/l.pullCPU.Seconds(), "cpuratio_"+l.name+"_pull")
		b.ReportMetric(l.rawPushCPU.Seconds()/l.pushCPU.Seconds(), "cpuratio_"+l.name+"_push")
		if l != links[0] {
			b.ReportMetric(links[0].pull.Seconds()/l.pull.Seconds(), l.name+"/grpc_pull")
			b.ReportMetric(links[0].push.Seconds()/l.push.Seconds(), l.name+"/grpc_push")
		}
	}
	for i, s := range c.Servers {
		if len(links) > 1 && s.DataLinkServed() == 0 {
			b.Fatalf("server %d took nothing over UCX", i)
		}
	}
}

// startRawUCX starts n UCX listeners that answer a pull with as many
// bytes as a parameter server would and a push with nothing, doing no
// work: the raw round trip over UCX. It returns their addresses.
func startRawUCX(b *testing.B, n, dim int) [][]byte {
	var addrs [][]byte
	for range n {
		l, err := ucx.Listen(quiet(), func(r *ucx.Request) {
			var payload []byte
			if h, _, err := ps.DecodeDataHead(r.Head); err == nil && h.Op == ps.OpPull {
				payload = r.Buffer(int(h.Keys) * dim * 4)
			}
			var head [8]byte
			r.Reply(ps.AppendDataStatus(head[:0], ps.DataStatus{}), payload)
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		rawListeners.Store(string(l.Address()), l)
		addrs = append(addrs, l.Address())
	}
	return addrs
}

// rawListeners finds a raw listener by address, to grant its sessions.
var rawListeners sync.Map

// rawUCXCaller connects a caller, on the UCX transport UCX_TLS names now,
// to the raw listeners at addrs and returns its round: every server's
// part sent at once, as a pull or a push.
func rawUCXCaller(b *testing.B, addrs [][]byte) func(b *testing.B, parts []part, dim int, pull bool) {
	d, err := ucx.NewDialer()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	conns := make([]*ucx.Conn, len(addrs))
	for i, a := range addrs {
		v, _ := rawListeners.Load(string(a))
		s, err := v.(*ucx.Listener).Accept(d.Address())
		if err != nil {
			b.Fatal(err)
		}
		if conns[i], err = d.Connect(a, s.Grant()); err != nil {
			b.Fatal(err)
		}
	}
	return func(b *testing.B, parts []part, dim int, pull bool) {
		var g errgroup.Group
		for i, p := range parts {
			if len(p.keys) == 0 {
				continue
			}
			g.Go(func() error {
				var hb [headBytes]byte
				op, body := uint32(ps.OpPush), [][]byte{ps.KeyBytes(p.keys), make([]byte, len(p.keys)*dim*4)}
				if pull {
					op, body = ps.OpPull, body[:1]
				}
				head := ps.AppendDataHead(hb[:0], ps.DataHead{Op: op, Keys: uint32(len(p.keys)), Table: "emb"})
				r, err := conns[i].Call(context.Background(), head, body, nil)
				if err == nil {
					_, err = ps.BytesFloats(r.Payload)
					r.Release()
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}
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

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
