package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// batchesScript prints one line per batch it is fed: rank, epoch, index,
// rows and a hash of the batch's features and labels in order.
const batchesScript = `import hashlib, numpy as np, spindle
r, e = spindle.rank(), 0
while True:
    ep = spindle.tensors()
    for i, (x, y) in enumerate(ep):
        h = hashlib.sha256(np.ascontiguousarray(x, np.float32).tobytes() + np.ascontiguousarray(y, np.float32).tobytes())
        print(f"batch rank={r} epoch={e} i={i:05d} rows={len(y)} h={h.hexdigest()[:16]}", flush=True)
    if ep.end_of_feed:
        break
    e += 1
`

var batchLine = regexp.MustCompile(`batch rank=\d+ epoch=\d+ i=\d+ rows=\d+ h=[0-9a-f]+`)

// TestDirectAndPushedFeedsAgree runs one Python script over the same data
// with the same seed twice, fed by the executor (tensor) and reading its
// splits itself (direct): every rank must see the same rows in the same
// batches in every epoch, shuffled, with even batches padded or dropped.
func TestDirectAndPushedFeedsAgree(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "batches.py")
	if err := os.WriteFile(script, []byte(batchesScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, format string
		rows, files  int
		args         []string
	}{
		{"arrow-shuffled-pad", "arrow", 2500, 3, []string{"--num-executors", "3", "--batch-rows", "64", "--epochs", "2",
			"--shuffle", "--seed", "7", "--conf", "spindle.feed.shuffleBufferRows=100", "--conf", "spindle.feed.evenBatches=pad"}},
		{"csv-split-order-drop", "csv", 1500, 2, []string{"--num-executors", "2", "--batch-rows", "50", "--epochs", "2",
			"--shuffle", "--seed", "3", "--conf", "spindle.feed.shuffleBufferRows=1", "--conf", "spindle.feed.evenBatches=drop"}},
		{"arrow-in-order-off", "arrow", 1000, 2, []string{"--num-executors", "3", "--batch-rows", "32", "--epochs", "1",
			"--conf", "spindle.feed.evenBatches=off"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := generate(t, tc.format, tc.rows, tc.files)
			run := func(mode string) []string {
				t.Helper()
				args := append([]string{"--input", data, "--label-column", "label", "--feed", mode}, tc.args...)
				r := spindle(t, data, submitArgs(append(args, "--", python, script)...)...)
				if r.code != 0 {
					t.Fatalf("%s job failed:\n%s", mode, r)
				}
				lines := batchLine.FindAllString(r.stdout, -1)
				slices.Sort(lines) // ranks interleave; within a rank the index orders them
				return lines
			}
			pushed, direct := run("tensor"), run("direct")
			if len(pushed) == 0 {
				t.Fatal("no batches fed")
			}
			if !slices.Equal(pushed, direct) {
				t.Fatalf("direct feeding differs from pushed feeding:\n--- tensor (%d batches)\n%s\n--- direct (%d batches)\n%s",
					len(pushed), strings.Join(pushed, "\n"), len(direct), strings.Join(direct, "\n"))
			}
		})
	}
}
