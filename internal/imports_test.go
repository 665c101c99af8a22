package internal

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/spindle-ml/spindle"

// imports returns the module's own packages that each of its packages
// imports, leaving tests out: a test may reach up, a package may not. The
// rules below share one go list of the whole module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module+"/")
		m[pkg] = nil
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				m[pkg] = append(m[pkg], rel)
			}
		}
	}
	return m
}

// TestInternalStaysOnTheGround checks the rule of the ground floor and the
// rooms just above it (docs/architecture.md): internal/ imports nothing
// outside internal/; observation never imports the driver, executor or a
// cluster manager it observes; of the product, only the spindle command
// links the test servers (for spindle minicluster); and YARN's cluster
// manager does not link the executor; ps does not import task; and only
// the driver links feed's push endpoint.
func TestInternalStaysOnTheGround(t *testing.T) {
	all := imports(t)
	for _, tc := range []struct {
		room    string // the packages the rule holds for; "" for all
		allowed func(pkg, imp string) bool
		rule    string
	}{
		{"internal", func(_, imp string) bool { return strings.HasPrefix(imp, "internal/") },
			"a package under internal/ imports only internal/"},
		{"observe", func(_, imp string) bool {
			return !hasRoom(imp, "driver", "executor", "yarn", "standalone", "cmd", "testbed")
		}, "observation sits below the driver, executors and cluster managers"},
		{"", func(pkg, imp string) bool {
			return !hasRoom(imp, "testbed") || hasRoom(pkg, "testbed", "e2e", "cmd")
		}, "only cmd/spindle (minicluster) links the test servers"},
		{"yarn", func(_, imp string) bool { return !hasRoom(imp, "executor") },
			"a cluster manager starts executors, it does not link their code (the contract is driver/driverpb and internal/envcontract)"},
		{"ps", func(_, imp string) bool { return !hasRoom(imp, "task") },
			"the parameter server and its client take their job's ranks as a ps.Ranks from the caller; they do not read a task's environment"},
		{"feed", func(pkg, imp string) bool { return !hasRoom(imp, "feed/push") || hasRoom(pkg, "feed/push") },
			"the push endpoint is the driver's: feed and an executor's reading do not link it"},
		{"feed/parquet", func(_, imp string) bool { return hasRoom(imp, "feed/parquet") },
			"the Parquet decoder stands alone: the feed uses it, it uses nothing of the feed's"},
		{"executor", func(_, imp string) bool { return !hasRoom(imp, "feed/push") },
			"the push endpoint is the driver's: feed and an executor's reading do not link it"},
		// model/predict plans too: its driver-side half counts a finished
		// output's rows.
		{"", func(pkg, imp string) bool {
			return !hasRoom(imp, "feed/plan") || hasRoom(pkg, "driver", "cmd", "e2e", "examples", "feed/plan", "model/predict")
		}, "planning is the driver's: an executor reads the splits it is sent with the feed alone"},
	} {
		for pkg, imps := range all {
			if tc.room != "" && !hasRoom(pkg, tc.room) {
				continue
			}
			for _, imp := range imps {
				if !tc.allowed(pkg, imp) {
					t.Errorf("%s imports %s: %s", pkg, imp, tc.rule)
				}
			}
		}
	}
}

// hasRoom reports whether the package path rel stands in one of rooms.
func hasRoom(rel string, rooms ...string) bool {
	for _, r := range rooms {
		if rel == r || strings.HasPrefix(rel, r+"/") {
			return true
		}
	}
	return false
}
