package chaos

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// The real-Hadoop faults run the row-id job against Apache Hadoop's own
// mini cluster (testbed/hadooptest: three datanodes, three NodeManagers,
// a NodeManager lost after 10 s): in local mode reading its input from
// HDFS while a datanode is stopped (its ports close), and on YARN while a
// NodeManager that runs an executor (not the ApplicationMaster) is
// stopped with its containers. Checkpoints stay on the local disk: the
// real namenode keeps handing out a stopped datanode for minutes, and
// colinmarc/hdfs cannot leave it out of a write pipeline (docs/hdfs.md).
// A stopped datanode is started again before the next run; a stopped
// NodeManager does not come back, so each YARN run gets a new cluster.

// realSite is the real mini cluster the faults run on.
type realSite struct {
	t       *testing.T
	c       *hadooptest.Cluster
	input   string
	stopped []int  // datanodes stopped, by the index they were stopped at
	yarnRun bool   // the cluster's NodeManagers may have been stopped
	lastNMs string // what NodeManagers said last
}

// ensure brings back a stopped datanode, and for a YARN fault starts a
// cluster whose NodeManagers all run.
func (r *realSite) ensure(yarn bool) {
	for _, i := range r.stopped {
		if err := r.c.RestartDataNode(i); err != nil {
			r.t.Fatal(err)
		}
	}
	r.stopped = nil
	if r.c == nil || r.yarnRun {
		if r.c != nil {
			r.c.Stop() // its NodeManager does not come back
		}
		// 768 MiB per NodeManager: the ApplicationMaster (256 MiB) and
		// the two executors (384 MiB each) do not fit on one, so one
		// NodeManager runs an executor and no ApplicationMaster.
		r.c = hadooptest.Private(r.t, 3, 3, "SPINDLE_HADOOP_NM_MEMORY_MB=768")
		r.yarnRun = false
		r.input = ""
	}
	r.yarnRun = yarn
	if r.input != "" {
		return
	}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: r.c.ConfDir})
	defer res.Close()
	files, _ := filepath.Glob(rowIDs)
	for _, f := range files {
		if err := upload(res, f, "hdfs:///chaos/rows/"+filepath.Base(f)); err != nil {
			r.t.Fatal(err)
		}
	}
	r.input = "hdfs:///chaos/rows/" + filepath.Base(rowIDs)
}

func realHadoopFaults(r *realSite) []fault {
	job := func(master, dir string) []string {
		args := []string{"submit", "--master", master, "--conf", "spindle.log.level=warn",
			"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=2",
			"--input", r.input, "--label-column", "id", "--feed", "tensor", "--batch-rows", "40", "--shuffle", "--seed", "3",
			"--epochs", fmt.Sprint(rowIDEpochs), "--checkpoint-dir", filepath.Join(dir, "ckpt"),
			"--conf", "spindle.feed.cache=0"}
		if master == "yarn" {
			args = append(args, "--num-executors", "2", "--executor-memory", "256m", "--conf", "spindle.network.interface=lo")
		}
		return append(args, "--", rowcheckBin, "--every", "10", "--pause", "4ms", "--crash-after", "0")
	}
	env := func() []string { return []string{"HADOOP_CONF_DIR=" + r.c.ConfDir} }
	training := func() bool { return len(rowchecks()) >= 2 }
	return []fault{
		{name: "real Hadoop datanode", want: 1, recovers: true, check: rowsOnce, env: env,
			args: func(dir, _ string) []string { return job("local[2]", dir) },
			victims: func(*exec.Cmd) []int {
				if !training() || len(r.stopped) > 0 {
					return nil
				}
				return []int{0, 1, 2}
			},
			kill: func(i int) string {
				if err := r.c.StopDataNode(i); err != nil {
					return fmt.Sprintf("no datanode (%v)", err)
				}
				r.stopped = append(r.stopped, i)
				return fmt.Sprintf("datanode %d of the real HDFS", i)
			}},
		{name: "real Hadoop NodeManager", want: 1, recovers: true, check: rowsOnce, env: env,
			args:  func(dir, _ string) []string { return job("yarn", dir) },
			again: rowchecks, againWant: 2,
			victims: func(*exec.Cmd) []int {
				if !training() {
					return nil
				}
				nms, err := r.c.NodeManagers()
				if seen := fmt.Sprint(nms, err); seen != r.lastNMs {
					r.t.Logf("NodeManagers: %s", seen) // why a run found no victim
					r.lastNMs = seen
				}
				if err != nil {
					return nil
				}
				var out []int
				for i, nm := range nms {
					if !nm.Down && !nm.AM && nm.Containers > 0 {
						out = append(out, i)
					}
				}
				return out
			},
			kill: func(i int) string {
				if err := r.c.StopNodeManager(i); err != nil {
					return fmt.Sprintf("no NodeManager (%v)", err)
				}
				return fmt.Sprintf("NodeManager %d of the real YARN", i)
			}},
	}
}
