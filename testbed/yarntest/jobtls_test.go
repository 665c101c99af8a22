package yarntest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

// TestSubmitJobTLS runs a job with spindle.job.tls.enabled on the test
// YARN, with the driver on the gateway and in the ApplicationMaster: the
// executors' TLS bundle reaches their containers in the credentials, never
// in a launch script, and they register with the driver over mutual TLS.
func TestSubmitJobTLS(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			s := startSite(t, yarntest.Config{NodeManagers: 2})
			input := s.putData(t)
			j := s.submit(t, "--deploy-mode", mode, "--name", "yarn-job-tls", "--num-executors", "2", "--executor-memory", "256m",
				"--conf", "spindle.job.tls.enabled=true", "--conf", "spindle.log.level=info",
				"--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
				"--epochs", "1", "--seed", "3", "--", logregBin, "--lr", "0.5")
			if code := j.wait(t, 3*time.Minute); code != 0 {
				t.Fatalf("spindle submit exited %d:\n%s", code, j.stderr.String())
			}
			out := j.stderr.String()
			regs := regexp.MustCompile(`msg="executor registered".* transport="([^"]+)"`).FindAllStringSubmatch(out, -1)
			if len(regs) != 2 {
				t.Fatalf("%d executors registered, want 2:\n%s", len(regs), out)
			}
			for _, m := range regs {
				if m[1] != "mutual TLS 1.3 (spindle-executor)" {
					t.Errorf("an executor registered over %q, want mutual TLS", m[1])
				}
			}
			for _, ct := range s.yarn.Containers() {
				b, err := os.ReadFile(filepath.Join(ct.WorkDir, "launch_container.sh"))
				if err != nil {
					t.Fatalf("launch script of %s: %v", ct.ID, err)
				}
				if strings.Contains(string(b), envcontract.JobTLS) || strings.Contains(string(b), "PRIVATE KEY") {
					t.Errorf("the launch script of %s holds the job's TLS bundle", ct.ID)
				}
			}
			if strings.Contains(out, "PRIVATE KEY") {
				t.Error("the executors' key is in submit's output")
			}
		})
	}
}
