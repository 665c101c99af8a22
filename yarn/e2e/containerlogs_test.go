package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// TestExecutorOutputInContainerLogs: in both deploy modes an executor
// container's stdout and stderr files hold its training process's output,
// as docs/yarn.md says (yarn logs -applicationId is where Hadoop users
// look).
func TestExecutorOutputInContainerLogs(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			code, stdout, stderr := submit(t, hc.ConfDir, 4*time.Minute, "--deploy-mode", mode, "--name", "container-logs-"+mode,
				"--num-executors", "1", "--executor-memory", "256m",
				"--", "sh", "-c", "echo to-stdout-$SPINDLE_RANK; echo to-stderr-$SPINDLE_RANK >&2")
			if code != 0 {
				t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
			}
			m := appRE.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("no application id printed:\n%s", stderr)
			}
			// The NodeManagers' log directories are under the mini
			// cluster's work directory, beside its configuration; the
			// AM's container is the first (its output is the driver's).
			found := map[string]string{}
			filepath.WalkDir(filepath.Dir(hc.ConfDir), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.Contains(p, m[1]) || strings.Contains(p, "_000001"+string(filepath.Separator)) ||
					(d.Name() != "stdout" && d.Name() != "stderr") {
					return nil
				}
				b, _ := os.ReadFile(p)
				found[p] = string(b)
				return nil
			})
			var sawOut, sawErr bool
			for p, text := range found {
				sawOut = sawOut || (strings.HasSuffix(p, "stdout") && strings.Contains(text, "to-stdout-0"))
				sawErr = sawErr || (strings.HasSuffix(p, "stderr") && strings.Contains(text, "to-stderr-0"))
			}
			if !sawOut || !sawErr {
				t.Fatalf("the executor container's logs lack its training output (stdout %v, stderr %v): %v", sawOut, sawErr, found)
			}
		})
	}
}
