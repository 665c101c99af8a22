package ucx

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnavailableWithoutCgo: a binary built without cgo runs, and says
// UCX is not available and why.
func TestUnavailableWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	bin := filepath.Join(t.TempDir(), "available")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/available")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build without cgo: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "false ucx: not available: built without cgo"; !strings.HasPrefix(got, want) {
		t.Fatalf("got %q, want it to start with %q", got, want)
	}
}

// TestAvailableReportsVersion: where UCX loads, Available names its
// version, as ucx_info does.
func TestAvailableReportsVersion(t *testing.T) {
	ok, detail := Available()
	if !ok {
		t.Skipf("UCX not available here: %s", detail)
	}
	out, err := exec.Command("ucx_info", "-v").Output()
	if err != nil {
		t.Skipf("no ucx_info to compare with: %v", err)
	}
	if v := strings.TrimPrefix(detail, "UCX "); !strings.Contains(string(out), v) {
		t.Fatalf("Available says %q; ucx_info -v says:\n%s", detail, out)
	}
}
