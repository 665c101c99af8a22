package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestOutputReachesSubmit: the training output of executors on standalone
// workers reaches the submit terminal once, prefixed with the rank, as a
// local job's does.
func TestOutputReachesSubmit(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 1000)
	j := c.submit(data, jobArgs("output", data, 0)...)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("job failed: exit %d\n%s", code, j.stderr.String())
	}
	out := j.stdout.String()
	for _, want := range []string{"[rank 0] feedcheck rank=0 world=2", "[rank 1] feedcheck rank=1 world=2"} {
		if n := strings.Count(out, want); n != 1 {
			t.Errorf("submit's output has %q %d times, want once:\n%s", want, n, out)
		}
	}
}
