package scaletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestRunYARNSmallJob runs a small job through the real ApplicationMaster
// against simulated NodeManagers: the gang is granted over several
// allocate calls (two containers a node per call), every container starts
// in-process, every simulated executor registers with the real driver and
// the job succeeds.
func TestRunYARNSmallJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	res, err := RunYARN(ctx, YARNOptions{Ranks: 40, StartLatency: 10 * time.Millisecond, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// 5 nodes of 8 executors, 2 granted per node per call: at least 4 calls.
	if res.Nodes != 6 || res.AllocateCalls < 4 {
		t.Errorf("%d nodes, gang held after %d allocate calls; want 6 nodes and at least 4 calls", res.Nodes, res.AllocateCalls)
	}
	if res.GangHeld <= 0 || res.SubmitToRegistered < res.GangHeld || res.RSSBytes == 0 {
		t.Errorf("implausible timings: %+v", res)
	}
}

// TestRunYARNNodeHeartbeats: with the ResourceManager granting on node
// heartbeats, as YARN does, the allocate call that carries the gang's asks
// gets nothing (no node has beaten since), so the gang takes more round
// trips than when every allocate call grants what fits at once.
func TestRunYARNNodeHeartbeats(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	calls := map[time.Duration]int{}
	for _, beat := range []time.Duration{0, 50 * time.Millisecond} {
		res, err := RunYARN(ctx, YARNOptions{Ranks: 16, GrantsPerNode: 8, NodeHeartbeat: beat,
			StartLatency: 10 * time.Millisecond, Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("node heartbeat %v: %v", beat, err)
		}
		calls[beat] = res.AllocateCalls
	}
	if calls[50*time.Millisecond] <= calls[0] {
		t.Fatalf("gang held after %d allocate calls with node heartbeats, %d without; want more with them", calls[50*time.Millisecond], calls[0])
	}
}

// BenchmarkYARN runs a whole job per world size through the real
// ApplicationMaster against simulated NodeManagers; make scale prints the
// same figures as a table.
func BenchmarkYARN(b *testing.B) {
	for _, n := range []int{100, 500, 1000, 2000} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := RunYARN(context.Background(), YARNOptions{Ranks: n, Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.AllocateCalls), "allocates")
				b.ReportMetric(res.GangHeld.Seconds(), "s-gang")
				b.ReportMetric(res.Launched.Seconds(), "s-launch")
				b.ReportMetric(res.SubmitToRegistered.Seconds(), "s-register")
				b.ReportMetric(res.AMCPU.Seconds(), "s-am-cpu")
				b.ReportMetric(float64(res.RSSBytes)/(1<<20), "MiB-rss")
			}
		})
	}
}
