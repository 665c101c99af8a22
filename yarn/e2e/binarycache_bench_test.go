package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// BenchmarkSubmitCachedBinary measures submit to every executor running
// (4 executors, the real mini cluster) for a job whose binary is already
// in the binary cache (a second job) against one that stages it with the
// application (spindle.yarn.binaryCache=off, how every job went before
// the cache). The two alternate, -benchtime runs each, so that the
// machine's load weighs on both alike; each reports its median.
func BenchmarkSubmitCachedBinary(b *testing.B) {
	hc := hadooptest.Shared(b)
	dir := fmt.Sprintf("/user/%s/.spindle/bench-cache-%d", currentUser(), time.Now().UnixNano())
	h := hdfsOf(b, hc)
	b.Cleanup(func() { removeAll(h, dir) })
	run := func(cache string) time.Duration {
		return untilLine(b, exec.Command(spindleBin, "submit", "--master", "yarn", "--conf", "spindle.network.interface=lo",
			"--conf", "spindle.yarn.binaryCache="+cache, "--name", "bench", "--num-executors", "4", "--executor-memory", "256m", "--", "true"),
			env(hc.ConfDir), allRegistered)
	}
	run(dir) // the first job, which fills the cache
	var cached, staged []time.Duration
	for range b.N {
		staged = append(staged, run("off"))
		cached = append(cached, run(dir))
	}
	slices.Sort(cached)
	slices.Sort(staged)
	b.Logf("cached: %v; staged with the application: %v", cached, staged)
	b.ReportMetric(cached[len(cached)/2].Seconds(), "s-cached")
	b.ReportMetric(staged[len(staged)/2].Seconds(), "s-staged")
	b.ReportMetric(0, "ns/op")
}
