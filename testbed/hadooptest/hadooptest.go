package hadooptest

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// EnvSkip, set to 1, skips the real-Hadoop tier.
const EnvSkip = "SPINDLE_SKIP_HADOOP"

// StartTimeout bounds the cluster's start (downloads excluded: they happen
// once, before it, through Maven), stretched by SPINDLE_TEST_TIMESCALE as
// every wait of a test is: a JVM starting four daemons beside other
// builds and tests takes longer than on an idle machine.
const StartTimeout = 4 * time.Minute

// Cluster is a running Hadoop mini cluster.
type Cluster struct {
	// ConfDir holds core-site.xml, hdfs-site.xml and yarn-site.xml: use
	// it as HADOOP_CONF_DIR.
	ConfDir string
	// AuditLog is the namenode's audit log: a line per namespace call
	// with its user and how it authenticated (auth:KERBEROS, auth:TOKEN).
	AuditLog string
	// Props are the "ready" line's values: fs.defaultFS,
	// yarn.resourcemanager.address, .scheduler.address, .webapp.address.
	Props map[string]string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
	// ctlMu serialises commands; answers carries their answer lines.
	ctlMu    sync.Mutex
	answers  chan string
	stopOnce sync.Once
}

var (
	once     sync.Once
	shared   *Cluster
	startErr error
	skipWhy  string
	workDir  string

	secureOnce     sync.Once
	secure         *SecureCluster
	secureStartErr error
	secureSkipWhy  string
	secureWorkDir  string
)

// Shared returns the test binary's cluster, starting it on first use; the
// test skips when Java or Maven is missing and fails when the cluster does
// not start.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	startShared()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if startErr != nil {
		t.Fatalf("start the Hadoop mini cluster: %v", startErr)
	}
	return shared
}

// Private starts a cluster of its own for the test (one whose datanodes
// and NodeManagers the test may stop), with the given numbers of
// datanodes and NodeManagers, stopped when the test ends; it skips as
// Shared does. env is added to the launcher's environment
// (SPINDLE_HADOOP_NM_MEMORY_MB=N gives each NodeManager N MiB).
func Private(t testing.TB, datanodes, nodemanagers int, env ...string) *Cluster {
	t.Helper()
	if why := skipReason(); why != "" {
		t.Skip(why)
	}
	script, err := script()
	if err != nil {
		t.Fatalf("start a Hadoop mini cluster: %v", err)
	}
	dir := t.TempDir()
	c, err := launch(script, dir, env, strconv.Itoa(datanodes), strconv.Itoa(nodemanagers))
	if err != nil {
		t.Fatalf("start a Hadoop mini cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// wholePackage reports whether every test of the package is to run: no
// -run names some of them, and -list does not ask for their names only.
func wholePackage() bool {
	for _, name := range []string{"test.run", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

// startShared starts the shared cluster once; callers after the first
// wait for it.
func startShared() { once.Do(func() { shared, startErr = start() }) }

// Prestart names a cluster Main starts before the first test.
type Prestart int

const (
	// PrestartShared starts Shared's cluster.
	PrestartShared Prestart = iota
	// PrestartSecure starts SharedSecure's cluster and its KDC.
	PrestartSecure
)

// Main runs a package's tests and stops the shared clusters after them.
// When the whole package runs (no -run), it starts the clusters pre names
// in the background first, so that their JVMs start while the first tests
// run instead of one after another when each is first used; a single test
// asked for by name starts only what it uses.
func Main(m *testing.M, pre ...Prestart) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	var wg sync.WaitGroup
	if wholePackage() {
		for _, p := range pre {
			switch p {
			case PrestartShared:
				wg.Go(startShared)
			case PrestartSecure:
				wg.Go(startSecureOnce)
			}
		}
	}
	code := m.Run()
	// A start still under way ends before the clusters are stopped. They
	// stop side by side: each JVM's shutdown (its NodeManagers cleaning
	// up, the datanodes) can take tens of seconds on a busy machine.
	wg.Wait()
	if shared != nil {
		wg.Go(shared.Stop)
	}
	if secure != nil {
		wg.Go(func() {
			secure.Stop()
			secure.KDC.Close()
		})
	}
	wg.Wait()
	for _, d := range []string{workDir, secureWorkDir} {
		if d != "" && !Keep() {
			os.RemoveAll(d)
		}
	}
	return code
}

// EnvKeep, set to 1, keeps the clusters' directories (their cluster.log)
// for a look after the tests; the next run's testbin.OwnedDir removes
// them.
const EnvKeep = "SPINDLE_HADOOP_KEEP"

// Keep reports whether EnvKeep asks to keep the clusters' directories, so
// a test package that holds them in a directory of its own keeps it too.
func Keep() bool { return os.Getenv(EnvKeep) == "1" }

// skipReason says why the real-Hadoop tier cannot run here, or "".
func skipReason() string {
	if os.Getenv(EnvSkip) == "1" {
		return "real Hadoop tier skipped: " + EnvSkip + "=1"
	}
	for _, tool := range []string{"java", "javac", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("real Hadoop tier skipped: %s is not installed (scripts/install-deps.sh installs it)", tool)
		}
	}
	return ""
}

// script returns the launcher's path after fetching Hadoop and building
// the launcher, without a deadline: the first run downloads Hadoop.
func script() (string, error) {
	script := filepath.Join(testbin.Root(), "scripts", "hadoop-minicluster.sh")
	fetch := exec.Command(script, "--fetch")
	if out, err := fetch.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s --fetch: %v\n%s", script, err, out)
	}
	return script, nil
}

func start() (*Cluster, error) {
	if skipWhy = skipReason(); skipWhy != "" {
		return nil, nil
	}
	script, err := script()
	if err != nil {
		return nil, err
	}
	if workDir, err = testbin.OwnedDir("spindle-hadoop-"); err != nil {
		return nil, err
	}
	return launch(script, workDir, nil, "3", "3")
}

// launch runs the launcher on dir with args after it and waits for the
// cluster to be ready.
func launch(script, dir string, env []string, args ...string) (*Cluster, error) {
	workDir := dir
	c := &Cluster{ConfDir: filepath.Join(workDir, "conf"), AuditLog: filepath.Join(workDir, "hdfs-audit.log"),
		Props: map[string]string{}, done: make(chan error, 1), answers: make(chan string, 1)}
	c.cmd = exec.Command(script, append([]string{workDir}, args...)...)
	if len(env) > 0 {
		c.cmd.Env = append(os.Environ(), env...)
	}
	logf, err := os.Create(filepath.Join(workDir, "cluster.log"))
	if err != nil {
		return nil, err
	}
	c.cmd.Stderr = logf
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", script, err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "spindle-minicluster ready:"):
				ready <- line
			case strings.HasPrefix(line, "spindle-minicluster did:"), strings.HasPrefix(line, "spindle-minicluster failed:"):
				c.answers <- line
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() { c.done <- c.cmd.Wait(); logf.Close() }()
	// A Timer, not Scale's one reading of the load: the clusters start
	// in make test's first minute, before the load of the tiers beside
	// (and of a second make test) has risen, and take minutes at it.
	deadline := testutil.NewTimer(StartTimeout)
	defer deadline.Stop()
	select {
	case line := <-ready:
		for _, f := range strings.Fields(strings.TrimPrefix(line, "spindle-minicluster ready:")) {
			if k, v, ok := strings.Cut(f, "="); ok {
				c.Props[k] = v
			}
		}
		return c, nil
	case err := <-c.done:
		return nil, fmt.Errorf("mini cluster exited before it was ready (%v); the end of %s:\n%s", err, logf.Name(), tail(logf.Name(), 4000))
	case <-deadline.C:
		c.Stop()
		return nil, fmt.Errorf("mini cluster not ready within %s (SPINDLE_TEST_TIMESCALE stretches it); the end of %s (removed with the test's directory):\n%s",
			deadline, logf.Name(), tail(logf.Name(), 4000))
	}
}

// tail returns up to the last n bytes of a file.
func tail(name string, n int64) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// Stop stops the cluster and waits for it, killing it after 30 seconds.
// It may be called more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// StopDataNode stops datanode i as a crash would: its ports close. Hadoop
// takes it out of the cluster's list, so the datanodes after it move down
// one place; RestartDataNode(i) brings it back, at the end of the list.
func (c *Cluster) StopDataNode(i int) error { return c.command(fmt.Sprintf("stop-datanode %d", i)) }

// RestartDataNode starts the datanode StopDataNode(i) stopped, on its old
// storage.
func (c *Cluster) RestartDataNode(i int) error {
	return c.command(fmt.Sprintf("restart-datanode %d", i))
}

// StopNodeManager stops NodeManager i, with its containers.
func (c *Cluster) StopNodeManager(i int) error {
	return c.command(fmt.Sprintf("stop-nodemanager %d", i))
}

// NodeManagerState is what NodeManagers says of one NodeManager.
type NodeManagerState struct {
	// Containers is how many containers it runs; AM says one of them is
	// an ApplicationMaster's; Down says it was stopped.
	Containers int
	AM, Down   bool
}

// NodeManagers says what each NodeManager runs, by index.
func (c *Cluster) NodeManagers() ([]NodeManagerState, error) {
	answer, err := c.ask("nodemanagers")
	if err != nil {
		return nil, err
	}
	var out []NodeManagerState
	for _, f := range strings.Fields(answer) {
		parts := strings.Split(f, ":")
		var st NodeManagerState
		if len(parts) > 1 && parts[1] == "down" {
			st.Down = true
		} else if len(parts) > 1 {
			st.Containers, _ = strconv.Atoi(parts[1])
			st.AM = len(parts) > 2 && parts[2] == "am"
		}
		out = append(out, st)
	}
	return out, nil
}

// command sends the launcher one control command and waits for its answer.
func (c *Cluster) command(cmd string) error {
	_, err := c.ask(cmd)
	return err
}

// ask sends the launcher one control command and returns what its answer
// says after the command.
func (c *Cluster) ask(cmd string) (string, error) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return "", fmt.Errorf("hadoop mini cluster: %s: %w", cmd, err)
	}
	select {
	case a := <-c.answers:
		if strings.HasPrefix(a, "spindle-minicluster failed:") {
			return "", fmt.Errorf("hadoop mini cluster: %s", strings.TrimPrefix(a, "spindle-minicluster failed: "))
		}
		return strings.TrimPrefix(strings.TrimPrefix(a, "spindle-minicluster did: "), cmd), nil
	case err := <-c.done:
		c.done <- err
		return "", fmt.Errorf("hadoop mini cluster: %s: the cluster exited (%v)", cmd, err)
	case <-time.After(2 * time.Minute):
		return "", fmt.Errorf("hadoop mini cluster: %s: no answer within 2 minutes", cmd)
	}
}

// Env returns the environment a Hadoop client needs to reach the cluster.
func (c *Cluster) Env() []string {
	return append(os.Environ(), "HADOOP_CONF_DIR="+c.ConfDir)
}
