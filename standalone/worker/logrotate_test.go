package worker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// An executor's output is rotated at the size bound, keeping so many old
// files; readers' offsets count from the stream's start across rotations,
// the dropped part is skipped, and a tail (negative offset) is the stream's
// last bytes.
func TestRotatingLog(t *testing.T) {
	dir := t.TempDir()
	l, err := openRotatingLog(dir, "stdout", 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for i := range 50 {
		line := fmt.Sprintf("line %03d of the training process\n", i) // 32 bytes
		if _, err := l.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		all.WriteString(line)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"stdout", "stdout.1", "stdout.2"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Size() > 100 {
			t.Fatalf("%s: %v, size %v (bound 100)", name, err, fi)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "stdout.3")); !os.IsNotExist(err) {
		t.Fatalf("a third old file was kept: %v", err)
	}

	// Reading from 0 starts at the oldest byte kept, and reading on goes
	// through the old files into the current one without a gap.
	data, next, size, err := readLog(dir, "stdout", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(all.Len()) {
		t.Fatalf("size %d, want %d written", size, all.Len())
	}
	got := append([]byte(nil), data...)
	for next < size {
		data, next, _, err = readLog(dir, "stdout", next, 1<<20)
		if err != nil || len(data) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", next, len(data), err)
		}
		got = append(got, data...)
	}
	if !bytes.HasSuffix(all.Bytes(), got) || len(got) < 200 || len(got) > 300 {
		t.Fatalf("read %d bytes that are not the stream's last ones", len(got))
	}
	tail, _, _, err := readLog(dir, "stdout", -40, 1<<20)
	if err != nil || !bytes.HasSuffix(all.Bytes(), tail) || len(tail) == 0 {
		t.Fatalf("tail %q, %v", tail, err)
	}

	// Reopened (a restarted worker), the stream goes on counting.
	l, err = openRotatingLog(dir, "stdout", 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("after the restart\n"))
	l.Close()
	if _, _, size2, _ := readLog(dir, "stdout", 0, 1); size2 != size+18 {
		t.Fatalf("size after reopening %d, want %d", size2, size+18)
	}

	// Without old files kept, rotation drops the output.
	l, err = openRotatingLog(t.TempDir(), "stderr", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l.Write([]byte("0123456789"))
	}
	l.Close()
	if entries, _ := os.ReadDir(l.dir); len(entries) != 2 { // stderr, stderr.rotated
		t.Fatalf("files %v", entries)
	}
}
