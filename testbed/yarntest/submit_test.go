package yarntest_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/executor"
	"github.com/spindle-ml/spindle/fsys"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/yarntest"
	"github.com/spindle-ml/spindle/yarn"
	"github.com/spindle-ml/spindle/yarn/client"
)

// `spindle submit --master yarn` as a user types it, against the test YARN
// and the test HDFS: the binaries are built once, on first use.

var (
	buildOnce                     sync.Once
	buildErr                      error
	binDir                        string
	spindleBin, logregBin, genBin string
	rowcheckBin, feedcheckBin     string
)

func TestMain(m *testing.M) {
	// The package's TMPDIR, for what the tests and their processes leave
	// in it (a killed executor's socket directory), and its binaries.
	dir, cleanup, err := testbin.TempDir("spindle-yarntest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = testbin.BinDir(dir)
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func binaries(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds spindle and runs jobs: not in -short")
	}
	buildOnce.Do(func() {
		buildErr = testbin.Build(context.Background(), testbin.Root(), binDir,
			testbin.Bin{Out: &spindleBin, Pkg: "./cmd/spindle"}, testbin.Bin{Out: &logregBin, Pkg: "./examples/logreg"},
			testbin.Bin{Out: &genBin, Pkg: "./examples/datagen"}, testbin.Bin{Out: &rowcheckBin, Pkg: "./e2e/rowcheck"},
			testbin.Bin{Out: &feedcheckBin, Pkg: "./e2e/feedcheck"})
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// site is a test HDFS and a test YARN with their configuration in one
// directory, as `spindle minicluster` writes it.
type site struct {
	hdfs    *hdfstest.Cluster
	yarn    *yarntest.Cluster
	confDir string
}

func startSite(t *testing.T, cfg yarntest.Config) *site {
	t.Helper()
	binaries(t)
	s := &site{confDir: t.TempDir()}
	s.hdfs = hdfstest.NewTestCluster(t, hdfstest.Config{DataNodes: 2, BlockSize: 8 << 20})
	if err := s.hdfs.WriteConfig(s.confDir); err != nil {
		t.Fatal(err)
	}
	cfg.HadoopConfDir = s.confDir
	s.yarn = yarntest.NewTestCluster(t, cfg)
	if err := s.yarn.WriteConfig(s.confDir); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *site) env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPINDLE_") && !strings.HasPrefix(kv, "HADOOP_") {
			out = append(out, kv)
		}
	}
	return append(out, "HADOOP_CONF_DIR="+s.confDir)
}

// job is a running spindle submit.
type job struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan int
}

func (s *site) submit(t *testing.T, args ...string) *job {
	t.Helper()
	cmd := exec.Command(spindleBin, append([]string{"submit", "--master", "yarn", "--conf", "spindle.network.interface=lo"}, args...)...)
	cmd.Env = s.env()
	j := &job{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan int, 1)}
	cmd.Stdout, cmd.Stderr = j.stderr, j.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			j.done <- ee.ExitCode()
			return
		}
		j.done <- 0
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return j
}

// until waits while spindle submit runs for cond to hold, a
// testutil.Budget of within at most; the test fails, quoting submit's
// output, if submit exits first or the budget is spent. what names the
// condition.
func (j *job) until(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	err := testutil.Poll(within, func() error {
		if cond() {
			return nil
		}
		select {
		case code := <-j.done:
			t.Fatalf("spindle submit exited %d before %s:\n%s", code, what, j.stderr.String())
		default:
		}
		return errors.New("no " + what + " yet")
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, j.stderr.String())
	}
}

// wait waits for spindle submit to exit and returns its exit code;
// within is a testutil.Timer's budget.
func (j *job) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	deadline := testutil.NewTimer(within)
	defer deadline.Stop()
	select {
	case code := <-j.done:
		return code
	case <-deadline.C:
		t.Fatalf("spindle submit still running after %s:\n%s", deadline, j.stderr.String())
		return -1
	}
}

var appIDRE = regexp.MustCompile(`yarn application (application_\d+_\d+) submitted`)

func (j *job) appID(t *testing.T) client.AppID {
	t.Helper()
	m := appIDRE.FindStringSubmatch(j.stderr.String())
	if m == nil {
		t.Fatalf("no application id printed:\n%s", j.stderr.String())
	}
	id, _ := client.ParseAppID(m[1])
	return id
}

func (s *site) report(t *testing.T, id client.AppID) *pb.ApplicationReportProto {
	t.Helper()
	rep, err := rmClient(t, s.yarn).Report(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// stagingGone checks that the application's staging directory is gone.
func (s *site) stagingGone(t *testing.T, id client.AppID) {
	t.Helper()
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: s.confDir})
	defer r.Close()
	ctx := context.Background()
	h, name, err := r.Resolve(ctx, s.hdfs.URI()+"/user/"+s.hdfs.Superuser()+"/.spindleStaging/"+id.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Stat(ctx, name); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("staging directory %s still there (stat: %v)", name, err)
	}
}

// putData generates a small Parquet data set on the test HDFS.
func (s *site) putData(t *testing.T) string {
	t.Helper()
	local := t.TempDir()
	if out, err := exec.Command(genBin, "--out", local, "--rows", "3000", "--features", "4", "--files", "3",
		"--format", "parquet", "--row-group-rows", "500", "--seed", "5").CombinedOutput(); err != nil {
		t.Fatalf("datagen: %v\n%s", err, out)
	}
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: s.confDir})
	defer r.Close()
	ctx := context.Background()
	files, _ := filepath.Glob(filepath.Join(local, "*.parquet"))
	for _, f := range files {
		h, name, err := r.Resolve(ctx, s.hdfs.URI()+"/data/logreg/"+filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.MkdirAll(ctx, filepath.Dir(name)); err != nil {
			t.Fatal(err)
		}
		w, err := h.CreateAtomic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(f)
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return s.hdfs.URI() + "/data/logreg/*.parquet"
}

// TestSubmitLogReg runs the Go logistic-regression example in client mode
// on two test NodeManagers, reading its input from the test HDFS: the
// application ends FINISHED/SUCCEEDED with its name, type, queue and tags,
// its staging directory is gone, and no launch script YARN wrote holds the
// job secret.
func TestSubmitLogReg(t *testing.T) {
	t.Parallel()
	s := startSite(t, yarntest.Config{NodeManagers: 2})
	input := s.putData(t)
	j := s.submit(t, "--name", "yarn-logreg", "--queue", "default", "--num-executors", "2", "--executor-memory", "256m",
		"--conf", "spindle.yarn.tags=test,logreg",
		"--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
		"--epochs", "2", "--seed", "3", "--", logregBin, "--lr", "0.5")
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("spindle submit exited %d:\n%s", code, j.stderr.String())
	}
	id := j.appID(t)
	// In client mode too the job is named after its application, from
	// its first log line to its last.
	if logs := j.stderr.String(); !strings.Contains(logs, "msg=\"submitting job\" job="+id.String()) ||
		!strings.Contains(logs, "job "+id.String()+" succeeded") {
		t.Errorf("the job's id is not its application's (%s):\n%s", id, logs)
	}
	rep := s.report(t, id)
	if rep.GetYarnApplicationState() != pb.YarnApplicationStateProto_FINISHED || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_SUCCEEDED ||
		rep.GetApplicationType() != "SPINDLE" || rep.GetName() != "yarn-logreg" || rep.GetQueue() != "default" ||
		strings.Join(rep.GetApplicationTags(), ",") != "test,logreg" {
		t.Fatalf("ResourceManager reports %v", rep)
	}
	s.stagingGone(t, id)
	scripts := 0
	for _, ct := range s.yarn.Containers() {
		b, err := os.ReadFile(filepath.Join(ct.WorkDir, "launch_container.sh"))
		if err != nil {
			t.Fatalf("launch script of %s: %v", ct.ID, err)
		}
		scripts++
		if strings.Contains(string(b), executor.EnvJobSecret) {
			t.Errorf("the launch script of %s holds %s", ct.ID, executor.EnvJobSecret)
		}
	}
	if scripts != 3 {
		t.Errorf("%d containers ran, want the AM and 2 executors", scripts)
	}
}

// runningExecutor waits until every executor registered and returns the
// container of one.
func runningExecutor(t *testing.T, s *site, j *job) yarntest.ContainerInfo {
	t.Helper()
	j.until(t, 2*time.Minute, "executors registered", func() bool { return strings.Contains(j.stderr.String(), "all executors registered") })
	for _, ct := range s.yarn.Containers() {
		if ct.ExecutorID != "" && ct.Running {
			return ct
		}
	}
	t.Fatalf("no running executor container: %+v", s.yarn.Containers())
	return yarntest.ContainerInfo{}
}

// TestSubmitContainerEnds ends an executor's container mid-job in the ways
// YARN can: the job fails with exit status 1 naming the executor, the
// application ends FAILED and its staging directory goes. A container
// killed behind YARN's back is reported with its container and exit
// status. YARN stops a preempted or memory-killed container with SIGTERM
// before SIGKILL, as the NodeManager does: the executor's own report of
// that SIGTERM reaches the driver first, and the driver waits for the AM's
// event, so the job's error gives YARN's reason (and says a preemption was
// not the job's fault).
func TestSubmitContainerEnds(t *testing.T) {
	t.Parallel()
	s := startSite(t, yarntest.Config{NodeManagers: 2})
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "d.csv"), []byte("x,label\n1,0\n2,1\n"), 0o644)
	for _, tc := range []struct {
		name  string
		fault func(id string) error
		want  []string
	}{
		{"killed", s.yarn.KillContainer, []string{"exited with status 137"}},
		{"preempted", s.yarn.Preempt, []string{"preempted by YARN", "not the job's fault"}},
		{"physical memory", func(id string) error { return s.yarn.KillForMemory(id, true) }, []string{"exceeding its physical memory limit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := s.submit(t, "--name", "victim", "--num-executors", "2", "--executor-memory", "256m",
				"--input", data, "--label-column", "label", "--", "sleep", "120")
			ct := runningExecutor(t, s, j)
			if err := tc.fault(ct.ID); err != nil {
				t.Fatal(err)
			}
			code := j.wait(t, 2*time.Minute)
			out := j.stderr.String()
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			want := append(tc.want, "executor "+ct.ExecutorID)
			if tc.want != nil {
				want = append(want, ct.ID)
			}
			for _, want := range want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			id := j.appID(t)
			if rep := s.report(t, id); rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_FAILED {
				t.Errorf("final status %v", rep.GetFinalApplicationStatus())
			}
			s.stagingGone(t, id)
		})
	}
}

// TestSubmitRefusals: a queue without room for the gang, and NMTokens the
// NodeManagers refuse, fail the job (exit 1) saying what was missing or
// refused, and leave nothing behind.
func TestSubmitRefusals(t *testing.T) {
	t.Parallel()
	s := startSite(t, yarntest.Config{NodeManagers: 2, Queues: []yarntest.QueueConfig{{Name: "ml", MemoryMB: 512}}})
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "d.csv"), []byte("x,label\n1,0\n2,1\n"), 0o644)
	for _, tc := range []struct {
		name  string
		setup func()
		args  []string
		want  []string
	}{
		{"queue without room", func() {}, []string{"--queue", "ml", "--conf", "spindle.yarn.gangTimeout=3s"},
			// 256m, the overhead and the arrow feed's 192 MiB of shared memory.
			[]string{"granted 0 of 2 containers", "missing 2 more of 576 MiB", "queue ml has 256 MiB"}},
		{"wrong NMToken", func() { s.yarn.WrongTokens(yarntest.NMTokens, true) }, nil,
			[]string{"container launch failed", "token rejected", "NodeManager 127.0.0.1:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			defer s.yarn.WrongTokens(yarntest.NMTokens, false)
			args := append(append([]string{"--name", "refused", "--num-executors", "2", "--executor-memory", "256m"}, tc.args...),
				"--input", data, "--label-column", "label", "--", "true")
			j := s.submit(t, args...)
			code := j.wait(t, 2*time.Minute)
			out := j.stderr.String()
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			id := j.appID(t)
			if rep := s.report(t, id); rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_FAILED {
				t.Errorf("final status %v", rep.GetFinalApplicationStatus())
			}
			s.stagingGone(t, id)
		})
	}
}

// TestSubmitProtected: on a YARN whose scheduler and NodeManagers require
// hadoop.rpc.protection privacy of token connections, the
// ApplicationMaster, told the site's setting by the gateway, registers
// with its AMRMToken and starts executors with NMTokens at privacy, and
// the job runs.
func TestSubmitProtected(t *testing.T) {
	t.Parallel()
	s := startSite(t, yarntest.Config{NodeManagers: 1, RPCProtection: "privacy"})
	core := filepath.Join(s.confDir, "core-site.xml")
	b, err := os.ReadFile(core)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "</configuration>", "<property><name>hadoop.rpc.protection</name><value>privacy</value></property></configuration>", 1))
	if err := os.WriteFile(core, b, 0o644); err != nil {
		t.Fatal(err)
	}
	input := s.putData(t)
	j := s.submit(t, "--name", "yarn-protected", "--num-executors", "1", "--executor-memory", "256m",
		"--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
		"--epochs", "1", "--", logregBin, "--lr", "0.5")
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("spindle submit exited %d:\n%s", code, j.stderr.String())
	}
}

// TestSubmitCachesBinary: the second job on a cluster finds the spindle
// binary the first uploaded to the binary cache and uploads nothing; a
// relative cache directory is refused before anything runs, exit 2,
// naming the key.
func TestSubmitCachesBinary(t *testing.T) {
	t.Parallel()
	s := startSite(t, yarntest.Config{NodeManagers: 1})
	run := func(args ...string) string {
		t.Helper()
		j := s.submit(t, append(append([]string{"--num-executors", "1", "--executor-memory", "128m"}, args...), "--", "/bin/sh", "-c", "exit 0")...)
		if code := j.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("spindle submit %v exited %d:\n%s", args, code, j.stderr.String())
		}
		return j.stderr.String()
	}
	if logs := run(); !strings.Contains(logs, yarn.MsgBinaryUploaded) {
		t.Fatalf("the first job did not upload its binary to the cache:\n%s", logs)
	}
	if logs := run(); !strings.Contains(logs, yarn.MsgBinaryCached) || strings.Contains(logs, yarn.MsgBinaryUploaded) {
		t.Fatalf("the second job did not use the cached binary:\n%s", logs)
	}
	j := s.submit(t, "--conf", "spindle.yarn.binaryCache=cache", "--num-executors", "1", "--", "/bin/sh", "-c", "exit 0")
	if code := j.wait(t, time.Minute); code != 2 || !strings.Contains(j.stderr.String(), "spindle.yarn.binaryCache") {
		t.Fatalf("a relative cache directory: exit %d, want 2 naming the key:\n%s", code, j.stderr.String())
	}
}
