package driver

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/observe/metrics"
)

// BenchmarkObserverMemory feeds the job's model what 1,000 executors send
// for b.N heartbeat rounds (progress, usage, a report and two output lines
// each) and reports the driver's live heap half way and at the end: once
// the model's bounds are reached (a few hundred rounds), it stays flat
// however long the job runs.
func BenchmarkObserverMemory(b *testing.B) {
	const n = 1000
	console := NewConsole(io.Discard, io.Discard, false)
	o := &observer{job: jobview.NewJob(), metrics: metrics.NewDriver(metrics.NewRegistry()), logger: slog.New(slog.DiscardHandler),
		ranks: map[int]rankSeen{}, console: console, usage: map[int]rankUsage{}, roles: map[int]string{}}
	console.setTap(o.outputLine)
	o.record(jobview.Event{Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "bench", WorldSize: n}})
	heap := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / (1 << 20)
	}
	progress := make([]rankProgress, n)
	var half float64
	b.ResetTimer()
	for round := 0; round < b.N; round++ {
		now := time.Now()
		for r := 0; r < n; r++ {
			o.news(heartbeatNews(&driverpb.HeartbeatRequest{ExecutorId: fmt.Sprintf("exec-%d", r), Rank: int32(r),
				Usage:   &driverpb.Usage{CpuSeconds: float64(round), MemoryBytes: 1 << 30},
				Reports: []*driverpb.Report{{Step: int64(round), Values: map[string]float64{"loss": 1 / float64(round+1), "acc": 0.5}, UnixMillis: now.UnixMilli()}},
				Output: []*driverpb.OutputLine{{Text: fmt.Sprintf("[rank %d] step %d loss 0.123456", r, round)},
					{Stderr: true, Text: fmt.Sprintf("[rank %d] warning at step %d", r, round)}},
			}))
			progress[r] = rankProgress{rank: r, role: RoleWorker, host: fmt.Sprintf("h%d", r%64),
				takenRows: int64(round) * 1000, takenBatches: int64(round) * 10, epoch: int32(round / 100)}
		}
		o.progress(now, progress)
		if round == b.N/2 {
			b.StopTimer()
			half = heap()
			runtime.KeepAlive(o)
			b.StartTimer()
		}
	}
	b.StopTimer()
	late := heap()
	runtime.KeepAlive(o)
	b.ReportMetric(half, "MiB-heap-half")
	b.ReportMetric(late, "MiB-heap-end")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/heartbeat")
}
