package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestJobTLSOnCluster: a job with spindle.job.tls.enabled runs on the
// standalone cluster, its executors (started by the workers, which pass
// the job's TLS bundle on as they pass its secret) reaching the driver
// over mutual TLS; the bundle's key is in no output.
func TestJobTLSOnCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 1000)
	j := c.submit(data, append([]string{"--conf", "spindle.job.tls.enabled=true"}, jobArgs("job-tls", data, 0)...)...)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("job failed: exit %d\n%s", code, j.stderr.String())
	}
	regs := regexp.MustCompile(`msg="executor registered".* transport="([^"]+)"`).FindAllStringSubmatch(j.stderr.String(), -1)
	if len(regs) != 2 {
		t.Fatalf("%d executors registered, want 2:\n%s", len(regs), j.stderr.String())
	}
	for _, m := range regs {
		if m[1] != "mutual TLS 1.3 (spindle-executor)" {
			t.Errorf("an executor registered over %q, want mutual TLS", m[1])
		}
	}
	if got := len(feedcheckEpoch.FindAllString(j.stdout.String(), -1)); got != 4 {
		t.Errorf("%d epochs fed, want 2 ranks × 2 epochs:\n%s", got, j.stdout.String())
	}
	out := j.stdout.String() + j.stderr.String()
	for _, p := range append(c.masters, c.workers...) {
		b, _ := os.ReadFile(p.log)
		out += string(b)
	}
	if strings.Contains(out, "PRIVATE KEY") {
		t.Error("the executors' key is in the job's output or a master's or worker's log")
	}
}
