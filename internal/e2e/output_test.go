package e2e

import (
	"strings"
	"testing"
)

// TestLongOutputLineDrained: a training process that writes a 3 MiB line
// (a progress bar redrawn with "\r" and never ended) must not stall its
// output: the job ends normally, the redraws become lines of their own,
// and the over-long line arrives cut, not whole.
func TestLongOutputLineDrained(t *testing.T) {
	data := generate(t, "parquet", 100, 1)
	script := `i=0; while [ $i -lt 3 ]; do printf 'step %d\r' $i >&2; i=$((i+1)); done; ` +
		`head -c 3145728 /dev/zero | tr '\0' x >&2; printf '\nafter the long line\n' >&2; echo done`
	r := spindle(t, data, submitArgs("--num-executors", "1", "--input", data, "--", "/bin/sh", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%.4000s", r)
	}
	for _, want := range []string{"[rank 0] step 0\n", "[rank 0] step 2\n", "[rank 0] after the long line\n", "more bytes dropped"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%.4000s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "[rank 0] done") {
		t.Errorf("stdout lacks the last line:\n%.4000s", r.stdout)
	}
	if len(r.stderr) > 1<<20 {
		t.Errorf("the over-long line was passed on whole (%d bytes of stderr)", len(r.stderr))
	}
}
