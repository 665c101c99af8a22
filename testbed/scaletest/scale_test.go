package scaletest

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestRunSmallJob runs a small job through the whole harness: every
// simulated executor registers with the real driver, heartbeats, and
// exits 0, so the driver's job succeeds; the UI, /metrics, the event log
// and the history server all answered.
func TestRunSmallJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	res, err := Run(ctx, Options{Ranks: 40, Heartbeat: 200 * time.Millisecond, Steady: 400 * time.Millisecond,
		StartLatency: 10 * time.Millisecond, StartSpread: 50 * time.Millisecond, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics.Bytes == 0 || res.Status.Bytes == 0 || res.Page.Bytes == 0 {
		t.Errorf("empty answers from the web UI: %+v", res)
	}
	if res.EventLogBytes == 0 || res.HistoryJob.Bytes == 0 {
		t.Errorf("no event log or history: %+v", res)
	}
	// 40 ranks on 5 hosts named worker-NNNN.rackNN.cluster.example.com, port 40000.
	if want := 40*len("worker-0000.rack00.cluster.example.com:40000") + 39; res.PeersEnvBytes != want {
		t.Errorf("SPINDLE_PEERS is %d bytes, want %d", res.PeersEnvBytes, want)
	}
}

// BenchmarkScale runs a whole job per world size; its metrics are the
// figures docs/scale.md tabulates (make scale prints the table).
func BenchmarkScale(b *testing.B) {
	chromium, _ := exec.LookPath("chromium")
	for _, n := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := Run(context.Background(), Options{Ranks: n, StartLatency: 500 * time.Millisecond,
					StartSpread: time.Second, Dir: b.TempDir(), Chromium: chromium})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.StartToRegistered.Seconds(), "s-register")
				b.ReportMetric(float64(res.HeartbeatCPU.Microseconds()), "µs-cpu/heartbeat")
				b.ReportMetric(float64(res.RSSBytes)/float64(n), "rss-bytes/rank")
				b.ReportMetric(res.PageRender.Seconds(), "s-render")
			}
		})
	}
}
