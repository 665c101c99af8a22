package e2e

import (
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// BenchmarkUIOverhead runs the same fed job (2 ranks, tensor feed, the
// feedcheck consumer, 20M rows in all) with the job's web UI, /metrics
// and event log on, and with the UI off and no event log, alternating,
// and reports each one's median rows/s over the whole job and their
// ratio: what seeing a job costs its feed.
func BenchmarkUIOverhead(b *testing.B) {
	const rows, epochs = 2000000, 10
	data := generateWith(b, "parquet", rows, 4, 16)
	events := filepath.Join(b.TempDir(), "events")
	run := func(observe bool) time.Duration {
		args := submitArgs("--num-executors", "2", "--input", data, "--label-column", "label", "--feed", "tensor",
			"--batch-rows", "512", "--epochs", "10")
		if observe {
			args = append(args, "--conf", "spindle.ui.enabled=true", "--conf", "spindle.ui.port=0",
				"--conf", "spindle.eventLog.dir="+events)
		} else {
			args = append(args, "--conf", "spindle.ui.enabled=false")
		}
		args = append(args, "--", feedcheckBin)
		cmd := exec.Command(spindleBin, args...)
		cmd.Dir = data
		cmd.Env = testEnv()
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("job: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	run(true) // warm the page cache and the binaries
	var on, off []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			off = append(off, float64(rows*epochs)/run(false).Seconds())
			on = append(on, float64(rows*epochs)/run(true).Seconds())
		} else {
			on = append(on, float64(rows*epochs)/run(true).Seconds())
			off = append(off, float64(rows*epochs)/run(false).Seconds())
		}
	}
	median := func(xs []float64) float64 {
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	b.ReportMetric(median(off), "rows/s-unobserved")
	b.ReportMetric(median(on), "rows/s-observed")
	b.ReportMetric(median(on)/median(off), "observed/unobserved")
}
