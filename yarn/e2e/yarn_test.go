package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/yarn"
	"github.com/spindle-ml/spindle/yarn/client"
)

var spindleBin, datagenBin, logregBin, sparseLRBin, rowcheckBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if os.Getenv(envWaitChild) == "1" {
		return m.Run()
	}
	// The package's binaries and TMPDIR, for what the tests, their
	// processes and the mini clusters leave in it (kept with the
	// clusters' logs when hadooptest.Keep says so).
	_, cleanup, err := testbin.Setup(context.Background(), "spindle-yarn-e2e-",
		testbin.Bin{Out: &spindleBin, Pkg: "./cmd/spindle"},
		testbin.Bin{Out: &datagenBin, Pkg: "./examples/datagen"},
		testbin.Bin{Out: &logregBin, Pkg: "./examples/logreg"},
		testbin.Bin{Out: &sparseLRBin, Pkg: "./examples/sparse-lr"},
		testbin.Bin{Out: &rowcheckBin, Pkg: "./e2e/rowcheck"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if !hadooptest.Keep() {
			cleanup()
		}
	}()
	return hadooptest.Main(m, hadooptest.PrestartShared, hadooptest.PrestartSecure)
}

// EnvLong, set to 1 (make test-long), gives the tests that have a long
// form their long form: the same assertions on more data.
const EnvLong = "SPINDLE_TEST_LONG"

// longTests reports whether the long forms were asked for.
func longTests() bool { return os.Getenv(EnvLong) == "1" }

// env is the environment of spindle: no admin defaults, HADOOP_CONF_DIR as
// given.
func env(confDir string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPINDLE_") && !strings.HasPrefix(kv, "HADOOP_") {
			out = append(out, kv)
		}
	}
	if confDir != "" {
		out = append(out, "HADOOP_CONF_DIR="+confDir)
	}
	return out
}

// submitArgs are spindle submit's arguments on the test YARN: executors
// on loopback and, ahead of args (a later --conf wins), a registration
// timeout on the test timescale. That timeout bounds the whole request:
// staging the binary, the delegation tokens and the ApplicationMaster's
// start as well as registration; a privacy-only job on a machine at load
// 30-80 spent 105 s staging its binary over encrypted data transfer and
// ran out of the 120 s default.
func submitArgs(args ...string) []string {
	return append([]string{"submit", "--master", "yarn", "--conf", "spindle.network.interface=lo",
		"--conf", "spindle.driver.registrationTimeout=" + testutil.Scale(4*time.Minute).String()}, args...)
}

// submit runs spindle submit (its timeout stretched by the test
// timescale) and returns its exit code, stdout and stderr.
func submit(t *testing.T, confDir string, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, spindleBin, submitArgs(args...)...)
	cmd.Env = env(confDir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run spindle submit: %v", err)
	}
	return code, stdout.String(), stderr.String()
}

var appRE = regexp.MustCompile(`yarn application (application_\d+_\d+) submitted`)

// putData generates a small Parquet data set and copies it to HDFS.
func putData(t *testing.T, hc *hadooptest.Cluster, dir string) string {
	t.Helper()
	local := t.TempDir()
	cmd := exec.Command(datagenBin, "--out", local, "--rows", "3000", "--features", "4", "--files", "3",
		"--format", "parquet", "--row-group-rows", "500", "--seed", "5")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("datagen: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(local, "*.parquet"))
	for _, f := range files {
		put(t, hc, f, hc.Props["fs.defaultFS"]+dir+"/"+filepath.Base(f))
	}
	return "hdfs://" + strings.TrimPrefix(hc.Props["fs.defaultFS"], "hdfs://") + dir + "/*.parquet"
}

func rmClient(t *testing.T, hc *hadooptest.Cluster) *client.Client {
	t.Helper()
	conf, err := client.LoadConf(hc.ConfDir)
	if err != nil {
		t.Fatal(err)
	}
	rms, _ := conf.RMAddrs()
	c, err := client.New(client.Config{RMAddrs: rms, User: "spindle-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stagingGone checks that the application's staging directory is gone.
func stagingGone(t *testing.T, hc *hadooptest.Cluster, appID string) {
	t.Helper()
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: hc.ConfDir})
	defer r.Close()
	ctx := context.Background()
	h, name, err := r.Resolve(ctx, hc.Props["fs.defaultFS"]+"/user/"+currentUser()+"/.spindleStaging/"+appID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Stat(ctx, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("staging directory %s still there (stat: %v)", name, err)
	}
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	out, _ := exec.Command("id", "-un").Output()
	return strings.TrimSpace(string(out))
}

// TestClientModeLogReg runs the Go logistic-regression example on three
// NodeManagers, reading its input from the real HDFS.
func TestClientModeLogReg(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	input := putData(t, hc, "/data/logreg")
	code, stdout, stderr := submit(t, hc.ConfDir, 4*time.Minute,
		"--name", "yarn-logreg", "--queue", "default", "--num-executors", "3", "--executor-memory", "256m",
		"--conf", "spindle.yarn.tags=e2e,logreg",
		"--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
		"--epochs", "2", "--seed", "3", "--", logregBin, "--lr", "0.5")
	if code != 0 {
		t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	m := appRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no application id printed:\n%s", stderr)
	}
	id, _ := client.ParseAppID(m[1])
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rep.GetYarnApplicationState() != pb.YarnApplicationStateProto_FINISHED || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_SUCCEEDED ||
		rep.GetApplicationType() != "SPINDLE" || rep.GetName() != "yarn-logreg" || strings.TrimPrefix(rep.GetQueue(), "root.") != "default" {
		t.Fatalf("ResourceManager reports %v %v type %q name %q queue %q", rep.GetYarnApplicationState(), rep.GetFinalApplicationStatus(),
			rep.GetApplicationType(), rep.GetName(), rep.GetQueue())
	}
	t.Logf("spindle submit:\n%s", stderr)
	if tags := strings.Join(rep.GetApplicationTags(), ","); tags != "e2e,logreg" {
		t.Errorf("tags %q", tags)
	}
	stagingGone(t, hc, m[1])
}

// TestBuiltinPSOnYARN runs Spindle's own parameter server in YARN
// containers: 2 workers and 2 servers, the servers run by the containers'
// own spindle binary. The sparse example trains to its known model's AUC.
func TestBuiltinPSOnYARN(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	code, stdout, stderr := submit(t, hc.ConfDir, 4*time.Minute,
		"--name", "yarn-ps", "--queue", "default", "--num-executors", "2", "--executor-memory", "256m",
		"--num-ps", "2", "--ps-memory", "512m", "--", sparseLRBin, "--rows", testbin.SparseLRRows, "--hot", testbin.SparseLRHot)
	if code != 0 {
		t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	m := regexp.MustCompile(`sparse-lr: auc (\S+) \(known model (\S+)\).* 2 servers, (\d+) pushes applied`).FindStringSubmatch(stdout + stderr)
	if m == nil {
		t.Fatalf("no result from worker 0\n--- stdout\n%s\n--- stderr\n%s", stdout, stderr)
	}
	trained, _ := strconv.ParseFloat(m[1], 64)
	known, _ := strconv.ParseFloat(m[2], 64)
	if trained < known-0.01 {
		t.Errorf("trained AUC %.4f is not within 0.01 of the known model's %.4f", trained, known)
	}
	if app := appRE.FindStringSubmatch(stderr); app != nil {
		stagingGone(t, hc, app[1])
	}
}

// TestGangTimeout asks for more than the cluster has: the gang times out,
// every container is released, and the error says what was missing.
func TestGangTimeout(t *testing.T) {
	hc := hadooptest.Shared(t)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "d.csv"), []byte("x,label\n1,0\n2,1\n3,0\n4,1\n"), 0o644)
	start := time.Now()
	code, stdout, stderr := submit(t, hc.ConfDir, 3*time.Minute,
		"--name", "too-big", "--num-executors", "4", "--executor-memory", "3g",
		"--conf", "spindle.yarn.gangTimeout=8s",
		"--input", data, "--label-column", "label", "--", "true")
	if code != 1 || !strings.Contains(stderr, "granted") || !strings.Contains(stderr, "of 4 containers") || !strings.Contains(stderr, "queue default has") {
		t.Fatalf("exit %d, want 1 with the missing containers and the queue's room\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	m := appRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no application id printed:\n%s", stderr)
	}
	id, _ := client.ParseAppID(m[1])
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_FAILED {
		t.Fatalf("report %v %v", rep.GetFinalApplicationStatus(), err)
	}
	stagingGone(t, hc, m[1])
	t.Logf("gang refused and cleaned up in %v", time.Since(start).Round(time.Millisecond))
}

// TestBadSetup: no HADOOP_CONF_DIR, or a ResourceManager that does not
// answer, fail before anything runs (exit 2) with a line naming the fix or
// the address.
func TestBadSetup(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "d.csv"), []byte("x,label\n1,0\n"), 0o644)
	dead := testaddr.Refusing(t)
	deadConf := t.TempDir()
	os.WriteFile(filepath.Join(deadConf, "yarn-site.xml"), []byte(`<configuration><property><name>yarn.resourcemanager.address</name><value>`+dead+`</value></property></configuration>`), 0o644)
	for _, tc := range []struct {
		name, confDir, want string
	}{
		{"no HADOOP_CONF_DIR", "", "HADOOP_CONF_DIR is not set"},
		{"unreachable ResourceManager", deadConf, dead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := submit(t, tc.confDir, time.Minute, "--input", data, "--label-column", "label", "--", "true")
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want 2 naming %q:\n%s", code, tc.want, stderr)
			}
		})
	}
}

// running starts spindle submit in the background and returns it with its
// stderr, which fills as it runs.
type running struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan int
}

func start(t *testing.T, confDir string, args ...string) *running {
	t.Helper()
	return startWith(t, confDir, nil, args...)
}

// startWith is start writing the gateway's stdout to stdout (nil: none).
func startWith(t *testing.T, confDir string, stdout io.Writer, args ...string) *running {
	t.Helper()
	cmd := exec.Command(spindleBin, submitArgs(args...)...)
	cmd.Env = env(confDir)
	r := &running{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan int, 1)}
	cmd.Stderr = r.stderr
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.done <- ee.ExitCode()
			return
		}
		r.done <- 0
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return r
}

// waitFor waits until stderr matches re and returns the match; within
// stretches with SPINDLE_TEST_TIMESCALE (testutil.WaitFor).
func (r *running) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	var m []string
	testutil.WaitFor(t, within, func() error {
		if m = re.FindStringSubmatch(r.stderr.String()); m == nil {
			return fmt.Errorf("no %s in stderr:\n%s", re, r.stderr.String())
		}
		return nil
	})
	return m
}

// wait waits for spindle submit to exit and returns its exit code; within
// is a testutil.Timer's budget.
func (r *running) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	deadline := testutil.NewTimer(within)
	defer deadline.Stop()
	select {
	case code := <-r.done:
		return code
	case <-deadline.C:
		t.Fatalf("spindle submit still running after %s:\n%s", deadline, r.stderr.String())
		return -1
	}
}

// TestContainerKilled kills an executor's process inside its container:
// YARN reports the container complete, the AM names it, and the job fails
// with the executor, host and container in its message; the application
// ends FAILED and its staging directory goes.
func TestContainerKilled(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "d.csv"), []byte("x,label\n1,0\n2,1\n"), 0o644)
	r := start(t, hc.ConfDir, "--name", "victim", "--num-executors", "2", "--executor-memory", "256m",
		"--input", data, "--label-column", "label", "--", "sleep", "120")
	app := r.waitFor(t, appRE, time.Minute)[1]
	m := r.waitFor(t, regexp.MustCompile(`executor registered.*executor=(exec-\d+).* pid=(\d+)`), 2*time.Minute)
	if out, err := exec.Command("kill", "-9", m[2]).CombinedOutput(); err != nil {
		t.Fatalf("kill executor %s (pid %s): %v %s", m[1], m[2], err, out)
	}
	code := r.wait(t, 2*time.Minute)
	stderr := r.stderr.String()
	if code != 1 || !strings.Contains(stderr, "container_") || !strings.Contains(stderr, m[1]) {
		t.Fatalf("exit %d, want 1 naming executor %s and its container:\n%s", code, m[1], stderr)
	}
	id, _ := client.ParseAppID(app)
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_FAILED {
		t.Fatalf("final status %v (%v)", rep.GetFinalApplicationStatus(), err)
	}
	stagingGone(t, hc, app)
}

// TestInterrupted: Ctrl-C on the gateway kills the application and removes
// its staging directory.
func TestInterrupted(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "d.csv"), []byte("x,label\n1,0\n2,1\n"), 0o644)
	r := start(t, hc.ConfDir, "--name", "interrupted", "--num-executors", "2", "--executor-memory", "256m",
		"--input", data, "--label-column", "label", "--", "sleep", "120")
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	r.cmd.Process.Signal(os.Interrupt)
	if code := r.wait(t, 2*time.Minute); code != 130 {
		t.Fatalf("exit %d after Ctrl-C, want 130:\n%s", code, r.stderr.String())
	}
	id, _ := client.ParseAppID(app)
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil || !client.IsFinal(rep.GetYarnApplicationState()) || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_KILLED {
		t.Fatalf("after Ctrl-C: %v %v (%v)", rep.GetYarnApplicationState(), rep.GetFinalApplicationStatus(), err)
	}
	stagingGone(t, hc, app)
}

// TestStatusAndKill: spindle status and spindle kill take YARN application
// ids; a killed application fails its job and leaves no staging behind.
func TestStatusAndKill(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "d.csv"), []byte("x,label\n1,0\n2,1\n"), 0o644)
	r := start(t, hc.ConfDir, "--name", "to-kill", "--num-executors", "2", "--executor-memory", "256m",
		"--input", data, "--label-column", "label", "--", "sh", "-c", "echo hello from rank $SPINDLE_RANK; exec sleep 120")
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	run := func(args ...string) string {
		cmd := exec.Command(spindleBin, args...)
		cmd.Env = env(hc.ConfDir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("spindle %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("status", app); !strings.Contains(out, "state RUNNING") || !strings.Contains(out, "type SPINDLE") || !strings.Contains(out, "to-kill") {
		t.Fatalf("spindle status %s:\n%s", app, out)
	}
	// Each executor's container holds its memory, the overhead and the
	// feed memory it shares with its training process, which both count
	// in their resident sizes: an arrow feed's 64 MiB message space twice
	// and its 64 MiB lent space (256m + 128m + 192m = 576 MiB, rounded up
	// to the scheduler's 128 MiB increment), beside the AM's 256 MiB.
	id, _ := client.ParseAppID(app)
	if rep, err := rmClient(t, hc).Report(context.Background(), id); err != nil {
		t.Fatal(err)
	} else if used := rep.GetAppResource_Usage().GetUsedResources().GetMemory(); used != 256+2*640 {
		t.Errorf("the application holds %d MiB, want %d (the AM and two executors of 640 MiB)", used, 256+2*640)
	}
	// The driver's web UI is the application's tracking URL: the
	// ResourceManager knows it and proxies it.
	if out := run("status", app); !strings.Contains(out, "job's web UI http://127.0.0.1:") || !strings.Contains(out, "/proxy/"+app) {
		t.Errorf("the job's web UI is not the tracking URL:\n%s", out)
	}
	// spindle logs takes the application id while it runs: the
	// ResourceManager names the driver's web UI, which has every rank's
	// output.
	testutil.WaitFor(t, 30*time.Second, func() error {
		out := run("logs", app)
		if strings.Contains(out, "[rank 0] hello from rank 0") && strings.Contains(out, "[rank 1] hello from rank 1") {
			return nil
		}
		return fmt.Errorf("spindle logs %s lacks the ranks' lines:\n%s", app, out)
	})
	run("kill", app)
	want := "yarn application " + app + " was killed by " + currentUser() + " (yarn application -kill / spindle kill)"
	if code := r.wait(t, 2*time.Minute); code != yarn.ExitKilled || !strings.Contains(r.stderr.String(), want) {
		t.Fatalf("exit %d after the application was killed, want %d saying %q:\n%s", code, yarn.ExitKilled, want, r.stderr.String())
	}
	if out := run("status", app); !strings.Contains(out, "state KILLED, final status KILLED") || strings.Contains(out, "tracking URL") ||
		!strings.Contains(out, "yarn logs -applicationId "+app) {
		t.Fatalf("spindle status after kill (want KILLED, no gone web UI, where the logs are):\n%s", out)
	}
	cmd := exec.Command(spindleBin, "logs", app)
	cmd.Env = env(hc.ConfDir)
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "yarn logs -applicationId "+app) ||
		!strings.Contains(string(out), "spindle-defaults.conf") || !strings.Contains(string(out), "has ended (KILLED, KILLED)") {
		t.Errorf("spindle logs of an ended application: exit %d (%v), want 2 pointing to YARN's log aggregation:\n%s", cmd.ProcessState.ExitCode(), err, out)
	}
	stagingGone(t, hc, app)
}

// TestStatusShowsPushedInput: spindle status of a running YARN job whose
// input is pushed says where producers push, from the driver's web UI
// the ResourceManager names.
func TestStatusShowsPushedInput(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	addr := testaddr.Free(t)
	tokenFile := filepath.Join(t.TempDir(), "producer.token")
	r := start(t, hc.ConfDir, "--name", "pushed", "--num-executors", "1", "--executor-memory", "256m",
		"--input", "flight-put://"+addr, "--conf", "spindle.flight.put.schema=x:float64,label:float64",
		"--conf", "spindle.flight.put.tokenFile="+tokenFile, "--label-column", "label", "--", "sleep", "120")
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	cmd := exec.Command(spindleBin, "status", app)
	cmd.Env = env(hc.ConfDir)
	out, err := cmd.CombinedOutput()
	want := "pushed input: producers DoPut to grpc://" + addr + ", token in " + tokenFile + " (files on the driver's host)"
	if err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("spindle status %s: %v; want %q in:\n%s", app, err, want, out)
	}
	if tok, _ := os.ReadFile(tokenFile); len(bytes.TrimSpace(tok)) == 0 || bytes.Contains(out, bytes.TrimSpace(tok)) {
		t.Fatalf("the token file holds %d bytes, and status shows the token: %v", len(tok), bytes.Contains(out, bytes.TrimSpace(tok)))
	}
	kill := exec.Command(spindleBin, "kill", app)
	kill.Env = env(hc.ConfDir)
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("spindle kill %s: %v\n%s", app, err, out)
	}
	r.wait(t, 2*time.Minute)
}
