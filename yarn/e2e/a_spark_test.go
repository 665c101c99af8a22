package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/yarn"
	"github.com/spindle-ml/spindle/yarn/client"
)

// sparkRows is how many rows the driver program's DataFrame has.
const sparkRows = 20000

var (
	sparkAppRE = regexp.MustCompile(`(?m)^SPARK_APP (application_\d+_\d+)$`)
	fedRE      = regexp.MustCompile(`(?m)^FED (\{.*\})$`)
)

// TestSparkOnYARNIntoSpindle runs a driver program (testdata/spark_push.py)
// whose Spark session has master yarn, its executors in the mini cluster's
// containers: Spark computes a DataFrame and spindle.spark.train pushes it
// from those executors into a 2-rank Spindle job, from the same program
// and Spark session first with Spindle on YARN (client mode), then on
// Spindle's standalone cluster. Every row reaches the ranks exactly once
// each time; YARN reports Spark's application succeeded and ran one more
// Spindle application.
func TestSparkOnYARNIntoSpindle(t *testing.T) {
	t.Parallel()
	py, jars := sparkPython(t)
	hc := hadooptest.Shared(t)
	standalone := startStandalone(t)
	masters := []string{"yarn", standalone.master}
	before := spindleApps(t, hc, sparkJobName)
	out := runSparkDriver(t, hc, py, jars, masters, "SPINDLE_CLUSTER_SECRET="+standalone.secret)
	fed := fedRE.FindAllStringSubmatch(out, -1)
	if len(fed) != len(masters) {
		t.Fatalf("want a FED line for each of %v:\n%s", masters, out)
	}
	for i, m := range fed {
		var got struct {
			Master      string `json:"master"`
			Ranks       []int  `json:"ranks"`
			IDs         int    `json:"ids"`
			ExactlyOnce bool   `json:"exactly_once"`
		}
		if err := json.Unmarshal([]byte(m[1]), &got); err != nil {
			t.Fatalf("FED line %q: %v", m[1], err)
		}
		if got.Master != masters[i] || !got.ExactlyOnce || got.IDs != sparkRows || len(got.Ranks) != 2 {
			t.Errorf("Spindle on %s: want %d rows over 2 ranks, each once; got %s", masters[i], sparkRows, m[1])
		}
	}
	sparkSucceeded(t, hc, out)
	if after := spindleApps(t, hc, sparkJobName); after != before+1 {
		t.Errorf("want one more Spindle application on YARN, got %d then %d", before, after)
	}
}

// sparkPython is the Python of the venv with pyspark that make deps makes
// ($SPINDLE_PY_VENV) and its Spark's jars directory, or the test skips
// saying why.
func sparkPython(t *testing.T) (string, string) {
	t.Helper()
	venv := os.Getenv("SPINDLE_PY_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-py-venv")
	}
	py := filepath.Join(venv, "bin", "python")
	out, err := exec.Command(py, "-c", "import pyspark, pyarrow, cloudpickle, os; print(os.path.dirname(pyspark.__file__))").Output()
	if err != nil {
		t.Skipf("%s cannot import pyspark, pyarrow and cloudpickle (make deps installs them): %v", py, err)
	}
	return py, filepath.Join(strings.TrimSpace(string(out)), "jars")
}

// runSparkDriver runs testdata/spark_push.py with its Spindle jobs on
// masters and returns its output; it fails the test when the program fails.
func runSparkDriver(t *testing.T, hc *hadooptest.Cluster, py, jars string, masters []string, extraEnv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(12*time.Minute))
	defer cancel()
	script := filepath.Join(repoRoot(t), "yarn", "e2e", "testdata", "spark_push.py")
	cmd := exec.CommandContext(ctx, py, append([]string{script, jars, fmt.Sprint(sparkRows)}, masters...)...)
	cmd.Env = append(env(hc.ConfDir), "SPINDLE_BINARY="+spindleBin, "SPARK_LOCAL_IP=127.0.0.1",
		"PYTHONPATH="+filepath.Join(repoRoot(t), "python"))
	cmd.Env = append(cmd.Env, extraEnv...)
	// Interrupted, the program stops its job and prints where it was.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("the driver program with Spindle on %v: %v\n%s", masters, err, out)
	}
	return out
}

// sparkSucceeded checks that YARN ran the printed Spark application and
// reports it succeeded.
func sparkSucceeded(t *testing.T, hc *hadooptest.Cluster, out string) {
	t.Helper()
	m := sparkAppRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the driver program printed no Spark application id:\n%s", out)
	}
	id, err := client.ParseAppID(m[1])
	if err != nil {
		t.Fatal(err)
	}
	rm := rmClient(t, hc)
	err = testutil.Poll(time.Minute, func() error {
		rep, err := rm.Report(context.Background(), id)
		if err != nil {
			return err
		}
		if rep.GetApplicationType() != "SPARK" || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_SUCCEEDED {
			return fmt.Errorf("application %s is %s, %v", m[1], rep.GetApplicationType(), rep.GetFinalApplicationStatus())
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// sparkJobName is the name testdata/spark_push.py gives its Spindle jobs.
const sparkJobName = "spark-into-spindle"

// spindleApps counts the Spindle applications named name that YARN knows
// (by name: the package's other tests run theirs beside).
func spindleApps(t *testing.T, hc *hadooptest.Cluster, name string) int {
	t.Helper()
	apps, err := rmClient(t, hc).Applications(context.Background(), yarn.ApplicationType)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range apps {
		if a.GetName() == name {
			n++
		}
	}
	return n
}
