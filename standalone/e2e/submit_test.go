package e2e

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestSubmitToCluster: a submit with the wrong cluster secret is bad input
// (exit 2) and says so; the job id a successful submit prints is the
// application id status shows.
func TestSubmitToCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 1000)

	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, spindleBin, append([]string{"submit", "--master", c.masterURL(), "--conf", "spindle.network.interface=lo"}, jobArgs("wrong-secret", data, 0)...)...)
	cmd.Dir = data
	for _, kv := range env() {
		if !strings.HasPrefix(kv, "SPINDLE_CLUSTER_SECRET=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SPINDLE_CLUSTER_SECRET=not-the-cluster-secret-0123456789")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "cluster secret") {
		t.Fatalf("submit with a wrong secret: %v, want exit 2 naming the cluster secret:\n%s", err, out)
	}

	j := c.submit(data, jobArgs("one-id", data, 0)...)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("job failed: exit %d\n%s", code, j.stderr.String())
	}
	m := regexp.MustCompile(`job (\S+) succeeded`).FindStringSubmatch(j.stderr.String())
	if m == nil {
		t.Fatalf("no job id in the submit's output:\n%s", j.stderr.String())
	}
	st, code := spindleCmd(t, "status", "--master", c.masterURL())
	if code != 0 || !regexp.MustCompile(regexp.QuoteMeta(m[1])+`\s+one-id`).MatchString(st) {
		t.Fatalf("status does not list the job id %s as the application:\n%s", m[1], st)
	}
}
