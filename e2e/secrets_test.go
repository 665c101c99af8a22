package e2e

import (
	"regexp"
	"testing"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// TestSecretsNotInTrainingReach: a training process finds neither the
// job's secret nor its TLS bundle in its executor's initial environment
// (/proc/PPID/environ) or its own.
func TestSecretsNotInTrainingReach(t *testing.T) {
	data := generate(t, "parquet", 100, 1)
	r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--conf", "spindle.job.tls.enabled=true",
		"--", "/bin/sh", "-c", envcontract.SecretLeakScript)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	lines := regexp.MustCompile(`\[rank \d\] secrets-leak=(\S+) parent=\S*spindle executor `).FindAllStringSubmatch(r.stdout, -1)
	if len(lines) != 2 {
		t.Fatalf("want a line from each of 2 ranks started by an executor:\n%s", r)
	}
	for _, m := range lines {
		if m[1] != "none" {
			t.Errorf("a training process reads the job's secrets in %s", m[1])
		}
	}
}
