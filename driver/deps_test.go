package driver

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDriverDoesNotImportExecutor keeps the contract between the driver
// and its executors on neutral ground (driver/driverpb,
// internal/envcontract): the driver must not depend on the executor's
// code, nor the executor's on the driver's.
func TestDriverDoesNotImportExecutor(t *testing.T) {
	for _, tc := range []struct{ pkg, banned string }{
		{".", "github.com/spindle-ml/spindle/executor"},
		{"../executor", "github.com/spindle-ml/spindle/driver"},
	} {
		out, err := exec.Command("go", "list", "-deps", tc.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == tc.banned {
				t.Errorf("%s depends on %s", tc.pkg, tc.banned)
			}
		}
	}
}
