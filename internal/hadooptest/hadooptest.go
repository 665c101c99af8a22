package hadooptest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvSkip, set to 1, skips the real-Hadoop tier.
const EnvSkip = "SPINDLE_SKIP_HADOOP"

// StartTimeout bounds the cluster's start (downloads excluded: they happen
// once, before it, through Maven).
const StartTimeout = 4 * time.Minute

// Cluster is a running Hadoop mini cluster.
type Cluster struct {
	// ConfDir holds core-site.xml, hdfs-site.xml and yarn-site.xml: use
	// it as HADOOP_CONF_DIR.
	ConfDir string
	// Props are the "ready" line's values: fs.defaultFS,
	// yarn.resourcemanager.address, .scheduler.address, .webapp.address.
	Props map[string]string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

var (
	once     sync.Once
	shared   *Cluster
	startErr error
	skipWhy  string
	workDir  string
)

// Shared returns the test binary's cluster, starting it on first use; the
// test skips when Java or Maven is missing and fails when the cluster does
// not start.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() { shared, startErr = start() })
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if startErr != nil {
		t.Fatalf("start the Hadoop mini cluster: %v", startErr)
	}
	return shared
}

// Main runs a package's tests and stops the shared cluster after them.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	if workDir != "" {
		os.RemoveAll(workDir)
	}
	return code
}

func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the source tree")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

func start() (*Cluster, error) {
	if os.Getenv(EnvSkip) == "1" {
		skipWhy = "real Hadoop tier skipped: " + EnvSkip + "=1"
		return nil, nil
	}
	for _, tool := range []string{"java", "javac", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipWhy = fmt.Sprintf("real Hadoop tier skipped: %s is not installed (scripts/install-deps.sh installs it)", tool)
			return nil, nil
		}
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	script := filepath.Join(root, "scripts", "hadoop-minicluster.sh")
	// Fetch first, without a deadline: the first run downloads Hadoop.
	fetch := exec.Command(script, "--fetch")
	if out, err := fetch.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s --fetch: %v\n%s", script, err, out)
	}
	if workDir, err = os.MkdirTemp("", "spindle-hadoop-"); err != nil {
		return nil, err
	}
	c := &Cluster{ConfDir: filepath.Join(workDir, "conf"), Props: map[string]string{}, done: make(chan error, 1)}
	c.cmd = exec.Command(script, workDir, "3", "3")
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
			if line := sc.Text(); strings.HasPrefix(line, "spindle-minicluster ready:") {
				ready <- line
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() { c.done <- c.cmd.Wait(); logf.Close() }()
	select {
	case line := <-ready:
		for _, f := range strings.Fields(strings.TrimPrefix(line, "spindle-minicluster ready:")) {
			if k, v, ok := strings.Cut(f, "="); ok {
				c.Props[k] = v
			}
		}
		return c, nil
	case err := <-c.done:
		return nil, fmt.Errorf("mini cluster exited before it was ready (%v); see %s", err, logf.Name())
	case <-time.After(StartTimeout):
		c.Stop()
		return nil, fmt.Errorf("mini cluster not ready within %v; see %s", StartTimeout, logf.Name())
	}
}

// Stop stops the cluster and waits for it, killing it after 30 seconds.
func (c *Cluster) Stop() {
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// Env returns the environment a Hadoop client needs to reach the cluster.
func (c *Cluster) Env() []string {
	return append(os.Environ(), "HADOOP_CONF_DIR="+c.ConfDir)
}

// WaitFor polls cond until it holds or ctx ends.
func WaitFor(ctx context.Context, every time.Duration, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
