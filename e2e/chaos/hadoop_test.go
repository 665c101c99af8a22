package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

// The Hadoop faults run the row-id job with its input and checkpoints on
// the protocol-level test HDFS (testbed/hdfstest: three datanodes, every
// block on two of them), in local mode while a datanode is killed (reads
// fail over to the other replica), and on the protocol-level test YARN
// (testbed/yarntest, three NodeManagers) while an executor's container is
// killed or a NodeManager is lost. A killed datanode is started again
// before the next run; each YARN run gets a YARN of its own, since a lost
// NodeManager does not come back.

// hadoopSite is the test HDFS and, for a YARN fault's run, a test YARN.
type hadoopSite struct {
	t    *testing.T
	hdfs *hdfstest.Cluster
	// confDir is the HDFS configuration; yarnConf the HDFS's and the
	// current YARN's.
	confDir, yarnConf string
	yarn              *yarntest.Cluster
	// input is the row ids' glob on HDFS.
	input string
}

// hdfsDataNodes and hdfsReplication: a datanode's loss leaves a replica
// of every block.
const hdfsDataNodes, hdfsReplication = 3, 2

// start starts the test HDFS until the test ends and puts the row ids on
// it, in blocks of 16 KiB so that each file spans several.
func (h *hadoopSite) start(t *testing.T) {
	h.t = t
	h.hdfs = hdfstest.NewTestCluster(t, hdfstest.Config{Dir: t.TempDir(), DataNodes: hdfsDataNodes,
		Replication: hdfsReplication, BlockSize: 16 << 10})
	h.confDir = t.TempDir()
	if err := h.hdfs.WriteConfig(h.confDir); err != nil {
		t.Fatal(err)
	}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: h.confDir, User: h.hdfs.Superuser()})
	defer res.Close()
	files, _ := filepath.Glob(rowIDs)
	for _, f := range files {
		if err := upload(res, f, "hdfs:///chaos/rows/"+filepath.Base(f)); err != nil {
			t.Fatal(err)
		}
	}
	h.input = "hdfs:///chaos/rows/" + filepath.Base(rowIDs)
	t.Cleanup(func() {
		if h.yarn != nil {
			h.yarn.Close()
		}
	})
}

// upload copies the local file to uri.
func upload(res *fsys.Resolver, local, uri string) error {
	ctx := context.Background()
	fs, name, err := res.Resolve(ctx, uri)
	if err != nil {
		return err
	}
	if err := fs.MkdirAll(ctx, filepath.Dir(name)); err != nil {
		return fmt.Errorf("create the directory of %s: %w", uri, err)
	}
	src, err := os.Open(local)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := fs.CreateAtomic(ctx, name)
	if err != nil {
		return fmt.Errorf("create %s: %w", uri, err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		return fmt.Errorf("write %s: %w", uri, err)
	}
	return dst.Commit()
}

// ensure brings back the datanodes a run killed and, for a YARN fault,
// starts a new test YARN of three NodeManagers.
func (h *hadoopSite) ensure(yarn bool) {
	for _, d := range h.hdfs.DataNodes() {
		if !d.Alive {
			if err := h.hdfs.RestartDataNode(d.Index); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	if h.yarn != nil {
		h.yarn.Close()
		h.yarn = nil
	}
	if !yarn {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	var err error
	if h.yarn, err = yarntest.Start(ctx, yarntest.Config{Dir: h.t.TempDir(), NodeManagers: 3, HadoopConfDir: h.confDir}); err != nil {
		h.t.Fatal(err)
	}
	h.yarnConf = h.t.TempDir()
	if err := h.hdfs.WriteConfig(h.yarnConf); err != nil {
		h.t.Fatal(err)
	}
	if err := h.yarn.WriteConfig(h.yarnConf); err != nil {
		h.t.Fatal(err)
	}
}

// hadoopFaults are the faults of the test HDFS and YARN of h.
func hadoopFaults(h *hadoopSite) []fault {
	job := func(master, dir string) []string {
		// Each run's checkpoints in a directory of their own.
		ckpt := "hdfs:///chaos/ckpt/" + filepath.Base(dir)
		args := []string{"submit", "--master", master, "--conf", "spindle.log.level=warn",
			"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=2",
			"--input", h.input, "--label-column", "id", "--feed", "tensor", "--batch-rows", "40", "--shuffle", "--seed", "3",
			"--epochs", fmt.Sprint(rowIDEpochs), "--checkpoint-dir", ckpt,
			// Every epoch reads HDFS again, so that reads after the kill
			// meet the lost datanode's replicas.
			"--conf", "spindle.feed.cache=0"}
		if master == "yarn" {
			args = append(args, "--num-executors", "2", "--executor-memory", "256m", "--conf", "spindle.network.interface=lo")
		}
		return append(args, "--", rowcheckBin, "--every", "10", "--pause", "4ms", "--crash-after", "0")
	}
	training := func() bool { return len(rowchecks()) >= 2 }
	hdfsEnv := func() []string {
		return []string{"HADOOP_CONF_DIR=" + h.confDir, "HADOOP_USER_NAME=" + h.hdfs.Superuser()}
	}
	yarnEnv := func() []string {
		return []string{"HADOOP_CONF_DIR=" + h.yarnConf, "HADOOP_USER_NAME=" + h.hdfs.Superuser()}
	}
	return []fault{
		{name: "YARN ApplicationMaster (cluster mode)", want: 1, recovers: true, check: rowsOnce, env: yarnEnv,
			args: func(dir, _ string) []string {
				a := job("yarn", dir)
				return slices.Insert(a, slices.Index(a, "--"), "--deploy-mode", "cluster", "--conf", "spindle.yarn.maxAppAttempts=2")
			},
			again: rowchecks, againWant: 2,
			victims: func(*exec.Cmd) []int {
				if !training() {
					return nil
				}
				var out []int
				for i, ct := range h.yarn.Containers() {
					if ct.AM && ct.Running {
						out = append(out, i)
					}
				}
				return out
			},
			kill: func(i int) string {
				ct := h.yarn.Containers()[i]
				if err := h.yarn.KillContainer(ct.ID); err != nil {
					return fmt.Sprintf("no container (%v)", err)
				}
				return fmt.Sprintf("the ApplicationMaster's container %s", ct.ID)
			}},
		{name: "HDFS datanode", want: 1, recovers: true, env: hdfsEnv,
			check: func(stdout string) error {
				if err := rowsOnce(stdout); err != nil {
					return err
				}
				// The job must have read blocks after the kill, or the
				// run did not test the reads' failover.
				if n := h.hdfs.Stats().ReadOps; n == 0 {
					return fmt.Errorf("the job read nothing from HDFS after the datanode was killed")
				}
				return nil
			},
			args: func(dir, _ string) []string { return job("local[2]", dir) },
			victims: func(*exec.Cmd) []int {
				if !training() {
					return nil
				}
				var alive []int
				for _, d := range h.hdfs.DataNodes() {
					if d.Alive {
						alive = append(alive, d.Index)
					}
				}
				return alive
			},
			kill: func(i int) string {
				if err := h.hdfs.KillDataNode(i); err != nil {
					return fmt.Sprintf("no datanode (%v)", err)
				}
				h.hdfs.ResetStats() // counts the reads after the kill
				return fmt.Sprintf("datanode %d", i)
			}},
		{name: "YARN executor container", want: 1, recovers: true, check: rowsOnce, env: yarnEnv,
			args:  func(dir, _ string) []string { return job("yarn", dir) },
			again: rowchecks, againWant: 2,
			victims: func(*exec.Cmd) []int {
				if !training() {
					return nil
				}
				var out []int
				for i, ct := range h.yarn.Containers() {
					if ct.ExecutorID != "" && ct.Running {
						out = append(out, i)
					}
				}
				return out
			},
			kill: func(i int) string {
				ct := h.yarn.Containers()[i]
				if err := h.yarn.KillContainer(ct.ID); err != nil {
					return fmt.Sprintf("no container (%v)", err)
				}
				return fmt.Sprintf("container %s (executor %s)", ct.ID, ct.ExecutorID)
			}},
		{name: "YARN NodeManager", want: 1, recovers: true, check: rowsOnce, env: yarnEnv,
			args:  func(dir, _ string) []string { return job("yarn", dir) },
			again: rowchecks, againWant: 2,
			victims: func(*exec.Cmd) []int {
				if !training() {
					return nil
				}
				// Nodes that run an executor and not the ApplicationMaster.
				am := map[int]bool{}
				execs := map[int]bool{}
				for _, ct := range h.yarn.Containers() {
					if ct.Running && ct.AM {
						am[ct.Node] = true
					}
					if ct.Running && ct.ExecutorID != "" {
						execs[ct.Node] = true
					}
				}
				var out []int
				for n := range execs {
					if !am[n] {
						out = append(out, n)
					}
				}
				slices.Sort(out)
				return out
			},
			kill: func(i int) string {
				if err := h.yarn.LoseNode(i); err != nil {
					return fmt.Sprintf("no NodeManager (%v)", err)
				}
				return fmt.Sprintf("NodeManager %d (%s)", i, h.yarn.Nodes()[i].Addr)
			}},
	}
}

// rowchecks lists the row-id job's training processes, wherever their
// program was put (a YARN container runs a copy).
func rowchecks() []int {
	base := filepath.Base(rowcheckBin)
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		if filepath.Base(argv0) != base {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(filepath.Base(filepath.Dir(f)), &pid); err == nil {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}
