package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
)

// The standalone faults run the row-id job on Spindle's own cluster
// manager, three masters and two workers started as processes, and kill a
// worker (its executors go with it: the masters report them lost, not by
// the job's fault, and the job restarts on the worker left), the leading
// master or a follower (the job goes on through the failover). A member a
// fault killed is started again before the next run.

// clusterSecret is the standalone cluster's secret in the harness.
const clusterSecret = "chaos-cluster-secret-0123456789abcdef"

// standaloneCluster is the masters and workers of the standalone faults.
type standaloneCluster struct {
	t       *testing.T
	dir     string
	addrs   []string
	masters []*member
	workers []*member
}

// member is one master or worker process.
type member struct {
	id   string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts the cluster, until the test ends.
func (c *standaloneCluster) start(t *testing.T) {
	c.t, c.dir = t, t.TempDir()
	var peers []string
	raft := make([]string, 3)
	for i := range 3 {
		c.addrs = append(c.addrs, testaddr.Free(t))
		raft[i] = testaddr.Free(t)
		peers = append(peers, fmt.Sprintf("m%d=%s@%s", i+1, raft[i], c.addrs[i]))
	}
	for i := range 3 {
		id := fmt.Sprintf("m%d", i+1)
		c.masters = append(c.masters, &member{id: id, args: []string{"master", "--id", id, "--addr", c.addrs[i],
			"--raft-addr", raft[i], "--peers", strings.Join(peers, ","), "--data-dir", filepath.Join(c.dir, id)}})
	}
	for i := range 2 {
		id := fmt.Sprintf("w%d", i+1)
		c.workers = append(c.workers, &member{id: id, args: []string{"worker", "--masters", strings.Join(c.addrs, ","), "--id", id,
			"--addr", testaddr.Free(t), "--cores", "4", "--memory", "4g", "--work-dir", filepath.Join(c.dir, id),
			"--conf", "spindle.worker.heartbeatInterval=200ms"}})
	}
	t.Cleanup(func() {
		for _, m := range append(c.masters, c.workers...) {
			if m.cmd != nil {
				m.cmd.Process.Kill()
				<-m.done
			}
		}
	})
	c.ensure()
}

// master is the job's --master.
func (c *standaloneCluster) master() string { return "spindle://" + strings.Join(c.addrs, ",") }

// ensure starts the members that are not running and waits until the
// cluster has a leader and both workers.
func (c *standaloneCluster) ensure() {
	for _, m := range append(c.masters, c.workers...) {
		if m.cmd != nil {
			select {
			case <-m.done:
			default:
				continue // running
			}
		}
		cmd := exec.Command(spindleBin, m.args...)
		cmd.Env = append(os.Environ(), "SPINDLE_CLUSTER_SECRET="+clusterSecret)
		logf, err := os.OpenFile(filepath.Join(c.dir, m.id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			c.t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			c.t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(done) }()
		m.cmd, m.done = cmd, done
	}
	cl, err := client.New(client.Config{Masters: c.addrs, Secret: clusterSecret})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
		st, err := cl.Status(ctx)
		cancel()
		alive := 0
		if err == nil && st.Leader() != "" {
			for _, w := range st.Cluster.GetWorkers() {
				if w.GetAlive() {
					alive++
				}
			}
		}
		if alive == len(c.workers) {
			return
		}
		if time.Since(start) > time.Minute {
			c.t.Fatalf("standalone cluster not up after a minute (%d workers alive, %v); logs in %s", alive, err, c.dir)
		}
	}
}

// leader returns the leading master's pid, and the others'.
func (c *standaloneCluster) leader() (int, []int) {
	cl, err := client.New(client.Config{Masters: c.addrs, Secret: clusterSecret})
	if err != nil {
		return 0, nil
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	st, err := cl.Status(ctx)
	if err != nil {
		return 0, nil
	}
	lead, others := 0, []int(nil)
	for _, m := range c.masters {
		if m.id == st.Leader() {
			lead = m.cmd.Process.Pid
		} else {
			others = append(others, m.cmd.Process.Pid)
		}
	}
	return lead, others
}

// standaloneFaults are the faults of the standalone cluster c.
func standaloneFaults(c *standaloneCluster) []fault {
	rows := func(dir, _ string) []string {
		return []string{"submit", "--master", c.master(), "--conf", "spindle.log.level=warn",
			"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=2",
			"--input", rowIDs, "--label-column", "id", "--feed", "tensor", "--batch-rows", "40", "--shuffle", "--seed", "3",
			"--epochs", fmt.Sprint(rowIDEpochs), "--checkpoint-dir", filepath.Join(dir, "ckpt"),
			"--", rowcheckBin, "--every", "10", "--pause", "2ms", "--crash-after", "0"}
	}
	// training says the job's ranks run, so that a kill lands mid-job.
	training := func() bool { return len(pids(rowcheckBin)) >= 2 }
	return []fault{
		{name: "standalone worker", args: rows, want: 1, recovers: true, check: rowsOnce,
			again: func() []int { return pids(rowcheckBin) }, againWant: 2,
			victims: func(*exec.Cmd) []int {
				if !training() {
					return nil
				}
				// The workers that run one of the job's executors (their
				// parent).
				var out []int
				for _, e := range pids(spindleBin, "executor") {
					for _, w := range c.workers {
						if ppid(e) == w.cmd.Process.Pid && !slices.Contains(out, w.cmd.Process.Pid) {
							out = append(out, w.cmd.Process.Pid)
						}
					}
				}
				return out
			}},
		{name: "standalone leader master", args: rows, want: 1, recovers: true, check: rowsOnce,
			victims: func(*exec.Cmd) []int {
				if lead, _ := c.leader(); lead != 0 && training() {
					return []int{lead}
				}
				return nil
			}},
		{name: "standalone follower master", args: rows, want: 1, recovers: true, check: rowsOnce,
			victims: func(*exec.Cmd) []int {
				if _, others := c.leader(); len(others) > 0 && training() {
					return others
				}
				return nil
			}},
	}
}

// ppid returns a process's parent, 0 when it cannot tell.
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so count from ')'.
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}
