package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeDelimited writes rows [start, start+n) with columns id, x, label
// separated by sep, each x padded with spaces that must survive.
func writeDelimited(t *testing.T, path string, sep string, start, n int, compress bool) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "id%sx%slabel\n", sep, sep)
	for i := start; i < start+n; i++ {
		fmt.Fprintf(&b, "%d%s %d %s%d\n", i, sep, i, sep, i%2)
	}
	data := []byte(b.String())
	if compress {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(data)
		_ = w.Close()
		data = buf.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sumOfFeedcheck adds the rows every rank reported for epoch 0.
func rowsOfFeedcheck(t *testing.T, out string) int {
	t.Helper()
	rows := 0
	for _, l := range parseFeedcheck(t, out) {
		if l.epoch == 0 {
			rows += l.rows
		}
	}
	return rows
}

// TestTabSeparatedInput: a tab delimiter given as \t on the command line
// (a literal tab would be trimmed away), and .tsv files recognised by
// their extension without any setting; gzip-compressed CSV read by its
// .gz extension.
func TestTabSeparatedAndCompressedInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	txt := filepath.Join(dir, "txt")
	if err := os.Mkdir(txt, 0o755); err != nil {
		t.Fatal(err)
	}
	writeDelimited(t, filepath.Join(txt, "data.csv"), "\t", 0, 300, false)
	r := spindle(t, dir, submitArgs("--num-executors", "2", "--input", txt, "--label-column", "label",
		"--conf", `spindle.input.csv.delimiter=\t`, "--", feedcheckBin)...)
	if r.code != 0 || rowsOfFeedcheck(t, r.stdout) != 300 {
		t.Fatalf("tab delimiter: want 300 rows fed:\n%s", r)
	}

	mixed := filepath.Join(dir, "mixed")
	if err := os.Mkdir(mixed, 0o755); err != nil {
		t.Fatal(err)
	}
	writeDelimited(t, filepath.Join(mixed, "a.tsv"), "\t", 0, 100, false)
	writeDelimited(t, filepath.Join(mixed, "b.csv.gz"), ",", 100, 150, true)
	writeDelimited(t, filepath.Join(mixed, "c.tsv.gz"), "\t", 250, 50, true)
	r = spindle(t, dir, submitArgs("--num-executors", "2", "--input", mixed, "--label-column", "label", "--", feedcheckBin)...)
	if r.code != 0 || rowsOfFeedcheck(t, r.stdout) != 300 {
		t.Fatalf(".tsv and .gz by extension: want 300 rows fed:\n%s", r)
	}

	snappy := filepath.Join(dir, "s.csv.snappy")
	if err := os.WriteFile(snappy, []byte("\x00\x00\x00\x10"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = spindle(t, dir, submitArgs("--input", snappy, "--", feedcheckBin)...)
	if r.code != 2 || !strings.Contains(r.stderr, "SnappyCodec") {
		t.Fatalf("Hadoop-framed snappy: want exit 2 naming the codec:\n%s", r)
	}
}

// TestHivePartitionsAsColumns: a Hive-style partitioned directory is read
// recursively, and spindle.input.partitionColumns feeds the partition
// values as a column (here the only feature: feedcheck sums it).
func TestHivePartitionsAsColumns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	table := filepath.Join(dir, "table")
	for day, rows := range map[int]int{1: 30, 2: 50} {
		d := filepath.Join(table, fmt.Sprintf("day=%d", day))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeDelimited(t, filepath.Join(d, "part-00000.csv"), ",", day*1000, rows, false)
	}
	if err := os.MkdirAll(filepath.Join(table, "_temporary"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeDelimited(t, filepath.Join(table, "_temporary", "part-9.csv"), ",", 0, 1000, false)
	r := spindle(t, dir, submitArgs("--num-executors", "1", "--input", table, "--columns", "day", "--label-column", "label",
		"--conf", "spindle.input.partitionColumns=day", "--", feedcheckBin)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	lines := parseFeedcheck(t, r.stdout)
	if len(lines) != 1 || lines[0].rows != 80 || lines[0].sum != 1*30+2*50 {
		t.Fatalf("want 80 rows whose day column sums to 130:\n%s", r)
	}
}
