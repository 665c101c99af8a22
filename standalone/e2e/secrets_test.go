package e2e

import (
	"regexp"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// TestSecretsNotInTrainingReach: on a standalone worker a training
// process finds the job's secret neither in its executor's initial
// environment (/proc/PPID/environ) nor in its own.
func TestSecretsNotInTrainingReach(t *testing.T) {
	c := startCluster(t, 2)
	data := generate(t, 100)
	j := c.submit(data, "--name", "leak", "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "256m",
		"--", "/bin/sh", "-c", envcontract.SecretLeakScript)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("job failed: exit %d\n%s", code, j.stderr.String())
	}
	lines := regexp.MustCompile(`\[rank \d\] secrets-leak=(\S+) parent=\S*spindle executor `).FindAllStringSubmatch(j.stdout.String(), -1)
	if len(lines) != 2 {
		t.Fatalf("want a line from each of 2 ranks started by an executor:\n%s%s", j.stdout.String(), j.stderr.String())
	}
	for _, m := range lines {
		if m[1] != "none" {
			t.Errorf("a training process reads the job's secret in %s", m[1])
		}
	}
}
