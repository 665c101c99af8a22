package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/yarn"
	"github.com/spindle-ml/spindle/yarn/client"
)

// sparkRows is how many rows the driver program's DataFrame has.
const sparkRows = 20000

var (
	sparkAppRE = regexp.MustCompile(`(?m)^SPARK_APP (application_\d+_\d+)$`)
	fedRE      = regexp.MustCompile(`(?m)FED (\{.*\})$`)
)

// sparkDriverHost is the address the driver program's Spark driver
// listens on and its executors reach it at: a loopback address, but not
// the one a local Spindle job's driver takes by default.
const sparkDriverHost = "127.0.0.2"

// TestSparkOnYARNIntoSpindle runs a driver program (testdata/spark_push.py)
// whose Spark session has master yarn, its executors in the mini cluster's
// containers: Spark computes DataFrames and spindle.spark.train pushes them
// from those executors into 2-rank Spindle jobs, all from the same program
// and Spark session: a new job on YARN (client mode), on a local master and
// on Spindle's standalone cluster; then two jobs of a warm session on each
// of YARN, a local master and the standalone cluster, each session job fed
// 2 epochs of a DataFrame of its own. Every job's rows reach its ranks
// exactly once per epoch, pushed from the executors' JVMs (the pusher's
// jar, which push adds to the session); a local master's push endpoint is
// on Spark's driver host, which Spark's executors reach (that driver's
// loopback they would not, on other hosts); YARN reports Spark's
// application succeeded and ran two more Spindle applications (the job
// and the session).
func TestSparkOnYARNIntoSpindle(t *testing.T) {
	t.Parallel()
	py, jars := sparkPython(t)
	hc := hadooptest.Shared(t)
	standalone := startStandalone(t)
	masters := []string{"yarn", "local[2]", standalone.master, "session:yarn", "session:local[2]", "session:" + standalone.master}
	var want []string // the master of each FED line, in order: a session's two jobs each have one
	for _, m := range masters {
		want = append(want, m)
		if strings.HasPrefix(m, "session:") {
			want = append(want, m)
		}
	}
	before := spindleApps(t, hc, sparkJobName)
	out := runSparkDriver(t, hc, py, jars, masters, "SPINDLE_CLUSTER_SECRET="+standalone.secret,
		"SPARK_DRIVER_HOST="+sparkDriverHost, fmt.Sprintf("SPINDLE_TEST_WAIT_SECONDS=%.0f", testutil.Scale(300*time.Second).Seconds()))
	fed := fedRE.FindAllStringSubmatch(out, -1)
	if len(fed) != len(want) {
		t.Fatalf("want a FED line for each job of %v:\n%s", want, out)
	}
	for i, m := range fed {
		checkFed(t, want[i], m[1])
	}
	sparkSucceeded(t, hc, out)
	if after := spindleApps(t, hc, sparkJobName); after != before+2 {
		t.Errorf("want two more Spindle applications on YARN, got %d then %d", before, after)
	}
}

// checkFed checks one FED line of testdata/spark_push.py: its job on
// master was fed every row once per epoch over 2 ranks, from the JVM, and
// a local master's Spark tasks pushed to Spark's driver host.
func checkFed(t *testing.T, master, line string) {
	t.Helper()
	var got struct {
		Master      string `json:"master"`
		Ranks       []int  `json:"ranks"`
		IDs         []int  `json:"ids"`
		ExactlyOnce bool   `json:"exactly_once"`
		Endpoint    string `json:"endpoint"`
		Pusher      string `json:"pusher"`
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("FED line %q: %v", line, err)
	}
	if got.Master != master || !got.ExactlyOnce || len(got.Ranks) != 2 {
		t.Errorf("Spindle on %s: want %d rows over 2 ranks, each once per epoch; got %s", master, sparkRows, line)
	}
	if got.Pusher != "jvm" {
		t.Errorf("Spindle on %s: Spark's executors pushed from %q, want from the JVM (the jar push adds to the session)", master, got.Pusher)
	}
	if !strings.HasSuffix(master, "local[2]") {
		return
	}
	u, err := url.Parse(got.Endpoint)
	if err != nil || u.Hostname() != sparkDriverHost {
		t.Errorf("Spindle on %s: Spark's executors pushed to %q, want Spark's driver host %s", master, got.Endpoint, sparkDriverHost)
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
	script := filepath.Join(testbin.Root(), "yarn", "e2e", "testdata", "spark_push.py")
	cmd := exec.CommandContext(ctx, py, append([]string{script, jars, fmt.Sprint(sparkRows)}, masters...)...)
	cmd.Env = append(env(hc.ConfDir), "SPINDLE_BINARY="+spindleBin, "SPARK_LOCAL_IP=127.0.0.1",
		"PYTHONPATH="+filepath.Join(testbin.Root(), "python"))
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
