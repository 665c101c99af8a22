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
// builds against a copy of go.mod, which the command's own dependencies
// are added to, so the repository's go.mod is left as it is: from the
// local module cache when that has them (GOPROXY=off), else fetching
// them from the module proxy, once per machine, as the real-Hadoop tests
// fetch Hadoop from Maven Central. The test skips when neither can build
// it.
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
	build := func(env ...string) ([]byte, error) {
		cmd := exec.Command("go", "build", "-modfile", filepath.Join(dir, "go.mod"), "-o", bin, "github.com/colinmarc/hdfs/v2/cmd/hdfs")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), append([]string{"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local"}, env...)...)
		return cmd.CombinedOutput()
	}
	if _, err := build("GOPROXY=off"); err != nil {
		if out, err := build(); err != nil {
			t.Skipf("build colinmarc/hdfs's hdfs command (from the module cache, then the module proxy): %v\n%s", err, out)
		}
	}
	return bin
}
