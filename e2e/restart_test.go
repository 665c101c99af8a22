package e2e

import (
	"strings"
	"testing"
)

// failFirstGeneration fails rank 1 in the job's first gang and succeeds in
// the next, saying which generation each rank ran in.
const failFirstGeneration = `echo "rank $SPINDLE_RANK generation $SPINDLE_GENERATION restarts $SPINDLE_RESTART_COUNT"
if [ "$SPINDLE_GENERATION" = 0 ] && [ "$SPINDLE_RANK" = 1 ]; then echo "the disk is on fire" >&2; exit 3; fi
sleep 0.2`

// TestRestartPolicy: under spindle.failure.policy restart a failed rank
// stops the gang and a new generation runs every rank again, told so by
// SPINDLE_GENERATION and SPINDLE_RESTART_COUNT; without it, or once the
// restarts are used up, the failure is final.
func TestRestartPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := spindle(t, dir, submitArgs("--num-executors", "2", "--conf", "spindle.failure.policy=restart",
		"--", "/bin/sh", "-c", failFirstGeneration)...)
	if r.code != 0 {
		t.Fatalf("a restarted job failed:\n%s", r)
	}
	for _, want := range []string{"[rank 1] rank 1 generation 0 restarts 0", "[rank 0] rank 0 generation 1 restarts 1", "[rank 1] rank 1 generation 1 restarts 1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stderr, "restarting every rank (restart 1 of 3)") {
		t.Errorf("the restart was not announced:\n%s", r)
	}
	// The notice says why the rank failed: its last lines of stderr.
	_, after, _ := strings.Cut(r.stderr, "each from its latest checkpoint; last lines of its stderr:\n")
	if next, _, _ := strings.Cut(after, "\n"); !strings.Contains(next, "the disk is on fire") {
		t.Errorf("the restart notice lacks the failed rank's stderr:\n%s", r)
	}

	r = spindle(t, dir, submitArgs("--num-executors", "2", "--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=0",
		"--", "/bin/sh", "-c", failFirstGeneration)...)
	if r.code != 1 || !strings.Contains(r.stderr, "restarted 0 times, spindle.failure.maxRestarts") {
		t.Fatalf("no restarts left: want exit 1 saying so:\n%s", r)
	}
	r = spindle(t, dir, submitArgs("--num-executors", "2", "--", "/bin/sh", "-c", failFirstGeneration)...)
	if r.code != 1 || strings.Contains(r.stdout, "generation 1") {
		t.Fatalf("the default policy restarted the job:\n%s", r)
	}
	r = spindle(t, dir, submitArgs("--conf", "spindle.failure.policy=sometimes", "--", "/bin/true")...)
	if r.code != 2 || !strings.Contains(r.stderr, "spindle.failure.policy") {
		t.Fatalf("an unknown policy: want exit 2 naming the key:\n%s", r)
	}
}
