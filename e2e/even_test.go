package e2e

import (
	"strings"
	"testing"
)

// TestEvenDropWithoutAFullBatchRefused: with evenBatches=drop and a batch
// larger than a rank's rows every rank would feed 0 batches (and an
// executor once read the 0 as "no target", so ranks disagreed and hung in
// allreduce). The submit refuses it before anything runs, exit 2.
func TestEvenDropWithoutAFullBatchRefused(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 1000, 1)
	r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--batch-rows", "1024",
		"--conf", "spindle.feed.evenBatches=drop", "--", feedcheckBin)...)
	if r.code != 2 {
		t.Fatalf("want exit status 2:\n%s", r)
	}
	for _, want := range []string{"spindle.feed.evenBatches=drop", "rank ", "fewer than one batch of 1024"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error lacks %q:\n%s", want, r.stderr)
		}
	}
}

// TestEvenPadCountsBatchesOnly: 1,000 rows on 2 ranks in batches of 1,024
// are one batch per rank already; padding must not fill them to 2,048.
func TestEvenPadCountsBatchesOnly(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 1000, 1)
	r := spindle(t, data, submitArgs("--num-executors", "2", "--input", data, "--batch-rows", "1024", "--", feedcheckBin)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	lines := parseFeedcheck(t, r.stdout)
	total := 0
	for _, l := range lines {
		total += l.rows
		if l.batches != 1 {
			t.Errorf("rank %d: %d batches, want 1", l.rank, l.batches)
		}
	}
	if len(lines) != 2 || total != 1000 {
		t.Fatalf("fed %d rows in %d rank-epochs, want 1000 in 2:\n%s", total, len(lines), r)
	}
}
