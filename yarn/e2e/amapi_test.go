package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// TestJobTLSAMAPI runs the Go example with spindle.job.tls.enabled on the
// real mini cluster in both deploy modes: the gateway talks to the
// ApplicationMaster over HTTPS (its URL, as the gateway's and the AM's
// logs give it), every call signed, and the job succeeds.
func TestJobTLSAMAPI(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	for _, mode := range []struct{ name, line string }{
		{"client", "following the ApplicationMaster"},
		{"cluster", "serving the gateway"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			input := putData(t, hc, "/data/amapi-tls-"+mode.name)
			code, stdout, stderr := submit(t, hc.ConfDir, 4*time.Minute,
				"--deploy-mode", mode.name, "--name", "yarn-amapi-tls", "--num-executors", "2", "--executor-memory", "256m",
				"--conf", "spindle.job.tls.enabled=true", "--conf", "spindle.log.level=info",
				"--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
				"--epochs", "1", "--seed", "3", "--", logregBin, "--lr", "0.5")
			if code != 0 {
				t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
			}
			m := regexp.MustCompile(`msg="` + mode.line + `".* url=(\S+)`).FindStringSubmatch(stdout + stderr)
			if m == nil {
				t.Fatalf("no %q line:\n--- stdout\n%s\n--- stderr\n%s", mode.line, stdout, stderr)
			}
			if !strings.HasPrefix(m[1], "https://") {
				t.Fatalf("the AM API is at %s with job TLS, want https://", m[1])
			}
		})
	}
}
