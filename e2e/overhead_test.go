package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
)

// epochSeconds reads feedcheck's epoch lines: rank, rows, seconds.
var epochSeconds = regexp.MustCompile(`feedcheck rank=(\d+) epoch=\d+ rows=(\d+) .* seconds=(\S+)`)

// BenchmarkUIOverhead runs the same fed job (2 ranks, tensor feed, the
// feedcheck consumer, 20M rows in all) with the job's web UI, /metrics
// and event log on, and with the UI off and no event log, alternating,
// and reports each one's median feed rate (rows over the time the ranks
// spent reading them) and their ratio: what seeing a job costs its feed.
func BenchmarkUIOverhead(b *testing.B) {
	const rows, epochs = 2000000, 10
	data := generateWith(b, "parquet", rows, 4, 16)
	events := filepath.Join(b.TempDir(), "events")
	// run returns the job's feed rate: the rows its ranks consumed over
	// the time they spent consuming them (feedcheck times each epoch), so
	// start-up and tear-down do not dilute the comparison.
	run := func(observe bool) float64 {
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
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("job: %v\n%s", err, out)
		}
		perRank := map[string]float64{}
		var total float64
		for _, m := range epochSeconds.FindAllStringSubmatch(string(out), -1) {
			s, _ := strconv.ParseFloat(m[3], 64)
			n, _ := strconv.ParseFloat(m[2], 64)
			perRank[m[1]] += s
			total += n
		}
		var longest float64
		for _, s := range perRank {
			longest = max(longest, s)
		}
		if longest == 0 {
			b.Fatalf("no epoch timings in the output:\n%s", out)
		}
		return total / longest
	}
	run(true) // warm the page cache and the binaries
	var on, off []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			off = append(off, run(false))
			on = append(on, run(true))
		} else {
			on = append(on, run(true))
			off = append(off, run(false))
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
