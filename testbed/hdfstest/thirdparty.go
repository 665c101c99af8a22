package hdfstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/spindle-ml/spindle/internal/testbin"
)

// ColinmarcCommand builds colinmarc/hdfs's own hdfs command, unchanged, at
// the version this module requires, and returns the binary's path: a
// third-party Hadoop client to point at a cluster, real or Spindle's. It
// builds from the local module cache only (GOPROXY=off) against a copy of
// go.mod, which the command's own dependencies are added to, so the
// repository's go.mod is left as it is. The test skips when the module
// cache cannot build it.
func ColinmarcCommand(t testing.TB) string {
	t.Helper()
	root := testbin.Root()
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatalf("hdfstest: copy the module's %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "hdfs")
	cmd := exec.Command("go", "build", "-modfile", filepath.Join(dir, "go.mod"), "-o", bin, "github.com/colinmarc/hdfs/v2/cmd/hdfs")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("build colinmarc/hdfs's hdfs command from the module cache: %v\n%s", err, out)
	}
	return bin
}
