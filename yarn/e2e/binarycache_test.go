package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/yarn"
)

// TestBinaryCacheOnRealYARN: on real Hadoop, with a binary cache of its
// own, two jobs submitted at once on the empty cache both succeed and
// leave one cached binary; a later job (and a cluster-mode one, whose
// ApplicationMaster launches the executors) uploads nothing and leaves the
// file's modification time alone; a cached copy of the wrong size is
// replaced, not used; spindle.yarn.binaryCache=off stages the binary with
// the application.
func TestBinaryCacheOnRealYARN(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	dir := fmt.Sprintf("/user/%s/.spindle/e2e-cache-%d", currentUser(), time.Now().UnixNano())
	entry := path.Join(dir, fileSHA256(t, spindleBin), "spindle")
	h := hdfsOf(t, hc)
	t.Cleanup(func() { removeAll(h, dir) })
	job := func(extra ...string) (int, string) {
		args := append([]string{"--num-executors", "1", "--executor-memory", "256m", "--conf", "spindle.yarn.binaryCache=" + dir}, extra...)
		code, stdout, stderr := submit(t, hc.ConfDir, 4*time.Minute, append(args, "--", "sh", "-c", "exit 0")...)
		return code, stdout + stderr
	}
	mustRun := func(want string, extra ...string) {
		t.Helper()
		code, logs := job(extra...)
		if code != 0 || !strings.Contains(logs, want) {
			t.Fatalf("spindle submit %v exited %d, want 0 and %q:\n%s", extra, code, want, logs)
		}
	}

	var wg sync.WaitGroup
	var codes [2]int
	var logs [2]string
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], logs[i] = job("--name", fmt.Sprintf("binary-cache-%d", i))
		}()
	}
	wg.Wait()
	for i := range codes {
		if codes[i] != 0 {
			t.Fatalf("concurrent submit %d exited %d:\n%s", i, codes[i], logs[i])
		}
	}
	first := stat(t, h, entry)
	if local, _ := os.Stat(spindleBin); first.Size() != local.Size() || first.Mode().Perm() != 0o500 {
		t.Fatalf("cached binary: %d bytes, mode %v; want %d, r-x------", first.Size(), first.Mode().Perm(), local.Size())
	}

	mustRun(yarn.MsgBinaryCached)
	mustRun(yarn.MsgBinaryCached, "--deploy-mode", "cluster")
	if now := stat(t, h, entry); !now.ModTime().Equal(first.ModTime()) {
		t.Fatalf("jobs that found the binary changed it: modified %v, then %v", first.ModTime(), now.ModTime())
	}

	if err := fsys.WriteAtomic(context.Background(), h, entry, strings.NewReader("truncated")); err != nil {
		t.Fatal(err)
	}
	mustRun(yarn.MsgBinaryUploaded)
	if now := stat(t, h, entry); now.Size() != first.Size() {
		t.Fatalf("the truncated binary was not replaced: %d bytes", now.Size())
	}

	mustRun("staged the spindle binary", "--conf", "spindle.yarn.binaryCache=off")
}

// fileSHA256 is the hex SHA-256 of a local file.
func fileSHA256(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hdfsOf is the real cluster's HDFS, as the test's user.
func hdfsOf(t testing.TB, hc *hadooptest.Cluster) fsys.FS {
	t.Helper()
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: hc.ConfDir})
	t.Cleanup(func() { r.Close() })
	h, _, err := r.Resolve(context.Background(), hc.Props["fs.defaultFS"]+"/")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func stat(t *testing.T, h fsys.FS, name string) fs.FileInfo {
	t.Helper()
	fi, err := h.Stat(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// removeAll removes a directory tree, best effort.
func removeAll(h fsys.FS, name string) {
	ctx := context.Background()
	entries, _ := h.ReadDir(ctx, name)
	for _, e := range entries {
		if e.IsDir() {
			removeAll(h, path.Join(name, e.Name()))
		} else {
			h.Remove(ctx, path.Join(name, e.Name()))
		}
	}
	h.Remove(ctx, name)
}
