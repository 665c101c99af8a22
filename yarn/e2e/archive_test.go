package e2e

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// TestArchiveOfManyFiles: an archive of 40,000 small files, as a packed
// Python environment has, reaches every executor of a cluster-mode job
// (the driver in the ApplicationMaster) with the default heartbeat
// timeout: the executors heartbeat while they unpack it, however long
// that takes. TestStatusShowsLocalizingRanks runs the same archive in
// client mode, and make test-long both modes ten times
// (TestArchiveRepeat). Each unpack here costs 10 to 30 CPU-s, most of
// it ext4 finding free inodes among the many the tests just deleted.
func TestArchiveOfManyFiles(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	work := t.TempDir()
	writeManyFileArchive(t, filepath.Join(work, "env.tar.gz"), 40000)
	code, stdout, stderr := submitIn(t, work, hc.ConfDir, 5*time.Minute, "--deploy-mode", "cluster", "--name", "many-files",
		"--num-executors", "2", "--executor-memory", "256m", "--archives", "env.tar.gz#env",
		"--", "sh", "-c", "test -f env/lib/d39/f39999.py && echo unpacked-$SPINDLE_RANK")
	if code != 0 {
		t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	if n := strings.Count(stdout+stderr, "unpacked-"); n != 2 {
		t.Fatalf("want both ranks to see the unpacked archive, saw %d:\n%s\n%s", n, stdout, stderr)
	}
}

func writeManyFileArchive(t *testing.T, path string, files int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for i := range files {
		body := fmt.Sprintf("# module %d\nVALUE = %d\n", i, i)
		hdr := &tar.Header{Name: fmt.Sprintf("lib/d%d/f%d.py", i/1000, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}
