package standalone_test

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/internal/testcluster"
	"github.com/spindle-ml/spindle/standalone/master"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkStandaloneLaunch8 measures the time from Request to all 8
// executors running on a 3-master, 2-worker cluster on loopback (executor
// processes are real: /bin/sh), beside the baseline of forking the same 8
// processes directly.
func BenchmarkStandaloneLaunch8(b *testing.B) {
	const runs, n = 9, 8
	g := testcluster.StartMasters(b, 3, nil)
	testcluster.StartWorker(b, g.Addrs(), "w1", nil)
	testcluster.StartWorker(b, g.Addrs(), "w2", nil)
	g.WaitWorkers(2)
	for i := 0; i < b.N; i++ {
		var cluster, local []time.Duration
		for r := 0; r < runs; r++ {
			cm := newManager(b, g, fmt.Sprintf("bench-%d-%d", i, r))
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
			start := time.Now()
			if err := cm.Request(ctx, specs(n, 1, 256, "sleep 30")); err != nil {
				b.Fatal(err)
			}
			cluster = append(cluster, time.Since(start))
			if err := cm.Release(ctx, nil); err != nil {
				b.Fatal(err)
			}
			cancel()
			if err := cm.Close(); err != nil {
				b.Fatal(err)
			}

			start = time.Now()
			cmds := make([]*exec.Cmd, n)
			for j := range cmds {
				cmds[j] = exec.Command("/bin/sh", "-c", "sleep 30")
				if err := cmds[j].Start(); err != nil {
					b.Fatal(err)
				}
			}
			local = append(local, time.Since(start))
			for _, c := range cmds {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
		mc, ml := median(cluster), median(local)
		b.ReportMetric(ms(mc), "ms-request-to-running")
		b.ReportMetric(ms(ml), "ms-local-fork")
		b.ReportMetric(float64(mc)/float64(ml), "x-local-fork")
		b.Logf("submit to %d executors running: median %.1f ms over %d runs (local fork of %d: %.2f ms, ratio %.0fx); raft: %s",
			n, ms(mc), runs, n, ms(ml), float64(mc)/float64(ml), g.Ms[0].RaftTimeouts())
	}
}

// raftTimings are the Raft timeouts one failover measurement runs with.
type raftTimings struct {
	name                 string
	heartbeat, election  time.Duration
	lease, commitTimeout time.Duration
}

func (rt raftTimings) apply(c *master.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout = rt.heartbeat, rt.election
	c.LeaderLeaseTimeout, c.CommitTimeout = rt.lease, rt.commitTimeout
}

// BenchmarkStandaloneFailover measures leader failover: from stopping the
// leader to the first write a client given every master gets committed.
// The default Raft timeouts run beside the earlier defaults (1 s
// heartbeat and election), the baseline, on two 3-master groups alive at
// once, the runs interleaved so that both see the same machine load.
func BenchmarkStandaloneFailover(b *testing.B) {
	d := master.DefaultConfig()
	timings := []raftTimings{
		{"defaults", d.HeartbeatTimeout, d.ElectionTimeout, d.LeaderLeaseTimeout, d.CommitTimeout},
		{"earlier-defaults", time.Second, time.Second, 500 * time.Millisecond, 50 * time.Millisecond},
	}
	const runs = 5
	groups := make([]*testcluster.Masters, len(timings))
	clients := make([]*client.Client, len(timings))
	for i, rt := range timings {
		groups[i] = testcluster.StartMasters(b, 3, rt.apply)
		clients[i] = groups[i].Client()
	}
	write := func(ctx context.Context, c *client.Client, name string) error {
		return c.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
			_, err := m.RegisterApp(ctx, &pb.RegisterAppRequest{Name: name, RequestId: name})
			return err
		})
	}
	for i := 0; i < b.N; i++ {
		took := make([][]time.Duration, len(timings))
		for r := 0; r < runs; r++ {
			for k, g := range groups {
				ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
				if err := write(ctx, clients[k], fmt.Sprintf("warm-%d-%d", i, r)); err != nil {
					b.Fatal(err)
				}
				l := g.Leader()
				// The clock starts once the leader's Raft is shut down:
				// from then on the followers hear nothing, as after a kill.
				g.Stop(l)
				start := time.Now()
				if err := write(ctx, clients[k], fmt.Sprintf("after-%d-%d", i, r)); err != nil {
					b.Fatal(err)
				}
				took[k] = append(took[k], time.Since(start))
				g.Start(l)
				cancel()
			}
		}
		base := median(took[1])
		for k, rt := range timings {
			m := median(took[k])
			b.ReportMetric(ms(m), "ms-failover-"+rt.name)
			b.Logf("leader failover (kill to first committed write), %s: median %.0f ms over %d runs, %.2fx the earlier defaults; raft: %s",
				rt.name, ms(m), runs, float64(m)/float64(base), groups[k].Ms[0].RaftTimeouts())
		}
		b.ReportMetric(float64(median(took[0]))/float64(base), "x-earlier-defaults")
	}
}
