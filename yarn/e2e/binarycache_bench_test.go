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
	// run returns the time to every executor running, and the processor
	// time the submit and the cluster spent on the whole job.
	run := func(cache string) (time.Duration, time.Duration) {
		before, err := hc.CPU()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(spindleBin, "submit", "--master", "yarn", "--conf", "spindle.network.interface=lo",
			"--conf", "spindle.yarn.binaryCache="+cache, "--name", "bench", "--num-executors", "4", "--executor-memory", "256m", "--", "true")
		took := untilLine(b, cmd, env(hc.ConfDir), allRegistered)
		after, err := hc.CPU()
		if err != nil {
			b.Fatal(err)
		}
		return took, after - before + cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	run(dir) // the first job, which fills the cache
	var cached, staged, cachedCPU, stagedCPU []time.Duration
	for range b.N {
		took, cpu := run("off")
		staged, stagedCPU = append(staged, took), append(stagedCPU, cpu)
		took, cpu = run(dir)
		cached, cachedCPU = append(cached, took), append(cachedCPU, cpu)
	}
	b.Logf("to running, cached: %v; staged with the application: %v", cached, staged)
	b.Logf("processor time, cached: %v; staged with the application: %v", cachedCPU, stagedCPU)
	b.ReportMetric(medianOf(cached).Seconds(), "s-cached")
	b.ReportMetric(medianOf(staged).Seconds(), "s-staged")
	b.ReportMetric(medianOf(cachedCPU).Seconds(), "cpu-s-cached")
	b.ReportMetric(medianOf(stagedCPU).Seconds(), "cpu-s-staged")
	b.ReportMetric(0, "ns/op")
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
