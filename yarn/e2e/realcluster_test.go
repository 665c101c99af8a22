package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/yarn/client"
)

// EnvRealYARN turns on the real-cluster tier: with it set to 1 and
// HADOOP_CONF_DIR naming a real cluster's client configuration, the
// logistic-regression example runs there in client and cluster mode.
const EnvRealYARN = "SPINDLE_TEST_REAL_YARN"

// TestRealCluster runs on a real Hadoop cluster when asked to (see
// EnvRealYARN and docs/yarn.md), and skips with a line saying so
// otherwise. Its data goes under the user's HDFS home, in a directory of
// its own that the test removes; the queue is spindle.yarn.queue's (or
// SPINDLE_TEST_REAL_YARN_QUEUE).
func TestRealCluster(t *testing.T) {
	confDir := os.Getenv("HADOOP_CONF_DIR")
	if os.Getenv(EnvRealYARN) != "1" || confDir == "" {
		t.Skipf("real-cluster tier skipped: set %s=1 and HADOOP_CONF_DIR to a real cluster's client configuration to run it", EnvRealYARN)
	}
	conf, err := client.LoadConf(confDir)
	if err != nil {
		t.Fatal(err)
	}
	hc := &hadooptest.Cluster{ConfDir: confDir, Props: map[string]string{"fs.defaultFS": conf.Get("fs.defaultFS", "")}}
	home := fmt.Sprintf("/user/%s/.spindle-test-%d", currentUser(), time.Now().UnixNano())
	input := putData(t, hc, home+"/logreg")
	t.Cleanup(func() { removeHDFS(t, hc, home) })
	queue := os.Getenv(EnvRealYARN + "_QUEUE")
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"--deploy-mode", mode, "--name", "spindle-real-cluster-" + mode, "--num-executors", "2",
				"--executor-memory", "512m", "--input", input, "--label-column", "label", "--feed", "tensor",
				"--epochs", "2", "--", logregBin, "--lr", "0.5"}
			if queue != "" {
				args = append([]string{"--queue", queue}, args...)
			}
			code, stdout, stderr := submit(t, confDir, 10*time.Minute, args...)
			if code != 0 {
				t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
			}
			m := appRE.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("no application id printed:\n%s", stderr)
			}
			id, _ := client.ParseAppID(m[1])
			rms, _ := conf.RMAddrs()
			c, err := client.New(client.Config{RMAddrs: rms, User: currentUser()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rep, err := c.Report(context.Background(), id)
			if err != nil || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_SUCCEEDED {
				t.Fatalf("application %s: final status %v (%v)", m[1], rep.GetFinalApplicationStatus(), err)
			}
			stagingGone(t, hc, m[1])
		})
	}
}
