package yarntest_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

// TestSecretsNotInContainerReach: in a YARN container a training process
// finds the job's secrets neither in its executor's initial environment
// (/proc/PPID/environ), nor its own, nor the container's credentials
// file it is given for its Hadoop tokens.
func TestSecretsNotInContainerReach(t *testing.T) {
	s := startSite(t, yarntest.Config{NodeManagers: 1})
	j := s.submit(t, "--num-executors", "1", "--executor-memory", "256m", "--conf", "spindle.job.tls.enabled=true",
		"--", "/bin/sh", "-c", envcontract.SecretLeakScript)
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("spindle submit exited %d:\n%s", code, j.stderr.String())
	}
	m := regexp.MustCompile(`secrets-leak=(\S+) parent=\S*spindle executor `).FindStringSubmatch(j.stderr.String())
	if m == nil {
		t.Fatalf("no line from the training process started by an executor:\n%s", j.stderr.String())
	}
	if m[1] != "none" {
		t.Errorf("the training process reads the job's secrets in %s", m[1])
	}
}
