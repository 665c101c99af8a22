package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/standalone/client"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"

	"github.com/spindle-ml/spindle/internal/testutil"
)

const secret = "e2e-cluster-secret-0123456789abcdef"

// Binaries built once for every test.
var spindleBin, feedcheckBin, datagenBin, logregBin, rolecheckBin, sparseLRBin, rowcheckBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "^$" {
		return m.Run() // benchmarks only: nothing to build
	}
	// The package's binaries and TMPDIR, for what the tests and their
	// processes leave in it (a killed executor's socket directory).
	// Nothing beside the binaries: spindle carries its Python package inside.
	_, cleanup, err := testbin.Setup(context.Background(), "spindle-standalone-e2e-",
		testbin.Bin{Out: &spindleBin, Pkg: "./cmd/spindle"},
		testbin.Bin{Out: &feedcheckBin, Pkg: "./e2e/feedcheck"},
		testbin.Bin{Out: &datagenBin, Pkg: "./examples/datagen"},
		testbin.Bin{Out: &logregBin, Pkg: "./examples/logreg"},
		testbin.Bin{Out: &rolecheckBin, Pkg: "./e2e/rolecheck"},
		testbin.Bin{Out: &sparseLRBin, Pkg: "./examples/sparse-lr"},
		testbin.Bin{Out: &rowcheckBin, Pkg: "./e2e/rowcheck"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	return m.Run()
}

// env is the environment of every spindle process: the cluster secret in
// the environment (never on a command line), no admin defaults.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPINDLE_") && !strings.HasPrefix(kv, "HADOOP_") {
			out = append(out, kv)
		}
	}
	return append(out, "SPINDLE_CLUSTER_SECRET="+secret)
}

// proc is a daemon started by a test.
type proc struct {
	name string
	args []string
	log  string
	env  []string // beside env(), winning over it
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p.cmd = exec.Command(spindleBin, p.args...)
	p.cmd.Env = append(env(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(p.cmd, p.done)
}

// kill sends SIGKILL, as a crash would, and waits for the process.
func (p *proc) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// cluster is a 3-master, 2-worker standalone cluster of real processes.
type cluster struct {
	t       *testing.T
	dir     string
	masters []*proc
	workers []*proc
	addrs   []string
	cl      *client.Client
}

// fastMaster keeps failover and loss detection within a second or two.
// A function, so the timeouts stretch with the load when a cluster
// starts: scaled when the test binary started, before a second make test
// beside loaded the machine, they let leaders flap at load 70.
// The gone timeout stays twice the worker timeout, scaled by the same
// load: tests of a killed worker expect its silence to tell (those of the
// closed connection set the gone timeout after these).
func fastMaster() []string {
	workerTimeout := testutil.Scale(1500 * time.Millisecond)
	return []string{
		"--conf", "spindle.master.raft.heartbeatTimeout=" + testutil.Scale(300*time.Millisecond).String(),
		"--conf", "spindle.master.raft.electionTimeout=" + testutil.Scale(300*time.Millisecond).String(),
		"--conf", "spindle.master.raft.leaderLeaseTimeout=" + testutil.Scale(150*time.Millisecond).String(),
		"--conf", "spindle.master.workerTimeout=" + workerTimeout.String(),
		"--conf", "spindle.master.workerGoneTimeout=" + (2 * workerTimeout).String(),
		"--conf", "spindle.master.appTimeout=" + testutil.Scale(10*time.Second).String(),
		"--conf", "spindle.executor.stopGracePeriod=" + testutil.Scale(2*time.Second).String(),
	}
}

func startCluster(t *testing.T, workerCores int) *cluster {
	t.Helper()
	return startClusterWith(t, workerCores, nil)
}

// startClusterWith starts the cluster with masterConf (--conf K=V
// arguments) after fastMaster's, which they override.
func startClusterWith(t *testing.T, workerCores int, masterConf []string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir()}
	var peers []string
	var raft []string
	for i := 1; i <= 3; i++ {
		c.addrs = append(c.addrs, testaddr.Free(t))
		raft = append(raft, testaddr.Free(t))
		peers = append(peers, fmt.Sprintf("m%d=%s@%s", i, raft[i-1], c.addrs[i-1]))
	}
	for i := 1; i <= 3; i++ {
		args := append([]string{"master", "--id", fmt.Sprintf("m%d", i), "--addr", c.addrs[i-1], "--raft-addr", raft[i-1],
			"--peers", strings.Join(peers, ","), "--data-dir", filepath.Join(c.dir, fmt.Sprintf("m%d", i))}, fastMaster()...)
		args = append(args, masterConf...)
		p := &proc{name: fmt.Sprintf("m%d", i), args: args, log: filepath.Join(c.dir, fmt.Sprintf("m%d.log", i))}
		p.start(t)
		c.masters = append(c.masters, p)
	}
	for i := 1; i <= 2; i++ {
		p := &proc{name: fmt.Sprintf("w%d", i), log: filepath.Join(c.dir, fmt.Sprintf("w%d.log", i)), args: []string{
			"worker", "--masters", strings.Join(c.addrs, ","), "--id", fmt.Sprintf("w%d", i), "--addr", "127.0.0.1:0",
			"--advertise-host", "127.0.0.1", "--cores", fmt.Sprint(workerCores), "--memory", "4g", "--gpus", "0",
			"--work-dir", filepath.Join(c.dir, fmt.Sprintf("w%d-work", i)),
			"--conf", "spindle.worker.heartbeatInterval=200ms"}}
		p.start(t)
		c.workers = append(c.workers, p)
	}
	var err error
	c.cl, err = client.New(client.Config{Masters: c.addrs, Secret: secret, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.cl.Close()
		for _, p := range append(c.workers, c.masters...) {
			p.kill()
		}
		if t.Failed() {
			c.dumpLogs()
		}
	})
	c.waitFor(30*time.Second, "2 alive workers", func(st *client.Status) bool { return aliveWorkers(st) == 2 })
	return c
}

func aliveWorkers(st *client.Status) int {
	n := 0
	for _, w := range st.Cluster.GetWorkers() {
		if w.GetAlive() {
			n++
		}
	}
	return n
}

func (c *cluster) dumpLogs() {
	for _, p := range append(c.masters, c.workers...) {
		b, _ := os.ReadFile(p.log)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		c.t.Logf("--- %s log (tail):\n%s", p.name, b)
	}
}

// status asks the masters for the cluster state.
func (c *cluster) status() (*client.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	return c.cl.Status(ctx)
}

// waitFor polls the cluster state until cond holds, for d stretched by
// the test timescale.
func (c *cluster) waitFor(d time.Duration, what string, cond func(*client.Status) bool) *client.Status {
	c.t.Helper()
	var st *client.Status
	testutil.WaitFor(c.t, d, func() error {
		s, err := c.status()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if !cond(s) {
			return fmt.Errorf("waiting for %s: not yet", what)
		}
		st = s
		return nil
	})
	return st
}

// leader returns the index of the leading master.
func (c *cluster) leader() int {
	c.t.Helper()
	var id string
	c.waitFor(30*time.Second, "a leader", func(st *client.Status) bool { id = st.Leader(); return id != "" })
	for i, p := range c.masters {
		if p.name == id {
			return i
		}
	}
	c.t.Fatalf("leader %q is not one of the masters", id)
	return -1
}

func (c *cluster) masterURL() string { return "spindle://" + strings.Join(c.addrs, ",") }

// job is a spindle submit running in the background.
type job struct {
	cmd            *exec.Cmd
	stdout, stderr syncbuf.Buffer
	done           chan struct{}
	err            error
}

// submit starts spindle submit against the cluster.
func (c *cluster) submit(dir string, args ...string) *job {
	c.t.Helper()
	full := append([]string{"submit", "--master", c.masterURL(),
		"--conf", "spindle.executor.heartbeatInterval=200ms",
		"--conf", "spindle.executor.heartbeatTimeout=" + testutil.Scale(6*time.Second).String(),
		"--conf", "spindle.executor.stopGracePeriod=2s",
		"--conf", "spindle.log.level=info",
		// The driver listens where it advertises: on loopback, as tests do.
		"--conf", "spindle.network.interface=lo"}, args...)
	j := &job{cmd: exec.Command(spindleBin, full...), done: make(chan struct{})}
	j.cmd.Dir = dir
	j.cmd.Env = env()
	j.cmd.Stdout, j.cmd.Stderr = &j.stdout, &j.stderr
	if err := j.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		j.err = j.cmd.Wait()
		close(j.done)
	}()
	c.t.Cleanup(func() {
		_ = j.cmd.Process.Kill()
		<-j.done
	})
	return j
}

// wait waits for the job and returns its exit status; within is a
// testutil.Timer's budget.
func (j *job) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	deadline := testutil.NewTimer(within)
	defer deadline.Stop()
	select {
	case <-j.done:
	case <-deadline.C:
		_ = j.cmd.Process.Kill()
		<-j.done
		t.Fatalf("job did not finish within %s\n--- stdout\n%s--- stderr\n%s", deadline, j.stdout.String(), j.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(j.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// appRunning returns the running executors of the application named name.
func appExecutors(st *client.Status, name string) []*pb.ExecutorInfo {
	ids := map[string]bool{}
	for _, a := range st.Cluster.GetApps() {
		if a.GetName() == name {
			ids[a.GetId()] = true
		}
	}
	var out []*pb.ExecutorInfo
	for _, e := range st.Cluster.GetExecutors() {
		if ids[e.GetAppId()] {
			out = append(out, e)
		}
	}
	return out
}

func running(es []*pb.ExecutorInfo) int {
	n := 0
	for _, e := range es {
		if e.GetState() == pb.ExecutorState_EXECUTOR_STATE_RUNNING {
			n++
		}
	}
	return n
}

// generate writes a small Parquet data set.
func generate(t *testing.T, rows int) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(datagenBin, "--out", dir, "--rows", fmt.Sprint(rows), "--features", "4", "--files", "2",
		"--format", "parquet", "--row-group-rows", "500", "--seed", "5")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("datagen: %v\n%s", err, out)
	}
	return dir
}

// spindleCmd runs a short spindle command and returns its output.
func spindleCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, spindleBin, args...)
	cmd.Env = env()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("spindle %v: %v", args, err)
	}
	return string(out), 0
}
