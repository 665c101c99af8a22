package hadooptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/spindle-ml/spindle/internal/testbin"
)

// TestFetchSideBySide: test binaries run side by side (go test runs
// packages in parallel, make test-hadoop runs the hdfs tier beside the
// hadoop tier), and each builds the launcher when it is not built yet.
// Two builds into one empty cache at once all succeed and leave one
// launcher. (They once shared one temporary classpath file, and the
// builds that lost the race to rename it failed.)
//
// It runs in the hadoop tier (two Maven and javac runs are minutes of a
// loaded machine's time, which the unit tier's critical path would pay):
// it skips as the other real-Hadoop tests do.
func TestFetchSideBySide(t *testing.T) {
	if why := skipReason(); why != "" {
		t.Skip(why)
	}
	script := filepath.Join(testbin.Root(), "scripts", "hadoop-minicluster.sh")
	cache := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			cmd := exec.Command(script, "--fetch")
			cmd.Env = append(os.Environ(), "SPINDLE_HADOOP_CACHE="+cache)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("build %d: %v\n%s", i, err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	classes, _ := filepath.Glob(filepath.Join(cache, "classes-*", "SpindleMiniCluster.class"))
	paths, _ := filepath.Glob(filepath.Join(cache, "classpath-*.txt"))
	left, _ := filepath.Glob(filepath.Join(cache, "build.*"))
	if len(classes) != 1 || len(paths) != 1 || len(left) != 0 {
		t.Fatalf("cache after two builds: launchers %q, classpaths %q, build directories left %q; want one launcher and its classpath", classes, paths, left)
	}
}
