package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// envWaitChild, set in the child run of TestWaitsStretchWithTimescale,
// makes that test run the waits that time out (and TestMain skip the
// builds and clusters the other tests need).
const envWaitChild = "SPINDLE_YARN_E2E_WAIT_CHILD"

// TestWaitsStretchWithTimescale: the waits on a running submit (waitFor,
// wait) stretch their deadlines with SPINDLE_TEST_TIMESCALE, as every test
// timing does. A child run of this test at timescale 40 waits 1 ms for a
// line and for an exit that never come: each gives up after 40 ms (the
// load stretch off, so the machine's load does not change the figure).
func TestWaitsStretchWithTimescale(t *testing.T) {
	if os.Getenv(envWaitChild) == "1" {
		r := &running{stderr: &syncbuf.Buffer{}, done: make(chan int)}
		t.Run("waitFor", func(t *testing.T) { r.waitFor(t, regexp.MustCompile("never-printed"), time.Millisecond) })
		t.Run("wait", func(t *testing.T) { r.wait(t, time.Millisecond) })
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWaitsStretchWithTimescale$", "-test.v")
	cmd.Env = append(os.Environ(), envWaitChild+"=1", testutil.EnvTimescale+"=40", testutil.EnvLoadStretch+"=off")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child's waits did not time out:\n%s", out)
	}
	for _, want := range []string{"timed out after 40ms: no never-printed in stderr", "spindle submit still running after 40ms"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the child's output lacks %q:\n%s", want, out)
		}
	}
}
