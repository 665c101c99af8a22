package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/yarn"
	"github.com/spindle-ml/spindle/yarn/client"
)

// report returns the ResourceManager's report of a printed application.
func report(t *testing.T, hc *hadooptest.Cluster, stderr string) (string, *pb.ApplicationReportProto) {
	t.Helper()
	m := appRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no application id printed:\n%s", stderr)
	}
	id, _ := client.ParseAppID(m[1])
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m[1], rep
}

// TestClusterModeLogReg runs the Go logistic-regression example with its
// driver inside the ApplicationMaster: spindle submit prints the
// application and its tracking URL, streams the driver's output, and exits
// 0; YARN reports the application SUCCEEDED; staging is gone.
func TestClusterModeLogReg(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	input := putData(t, hc, "/data/logreg-cluster")
	code, stdout, stderr := submit(t, hc.ConfDir, 4*time.Minute,
		"--deploy-mode", "cluster", "--name", "yarn-logreg-cluster", "--queue", "default",
		"--num-executors", "3", "--executor-memory", "256m", "--conf", "spindle.yarn.tags=e2e,cluster",
		"--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "128",
		"--epochs", "2", "--seed", "3", "--", logregBin, "--lr", "0.5")
	if code != 0 {
		t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	t.Logf("spindle submit:\n%s", stderr)
	app, rep := report(t, hc, stderr)
	if rep.GetYarnApplicationState() != pb.YarnApplicationStateProto_FINISHED || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_SUCCEEDED ||
		rep.GetApplicationType() != "SPINDLE" || rep.GetName() != "yarn-logreg-cluster" {
		t.Fatalf("ResourceManager reports %v %v type %q name %q", rep.GetYarnApplicationState(), rep.GetFinalApplicationStatus(),
			rep.GetApplicationType(), rep.GetName())
	}
	// The gateway saw the application accepted with its tracking URL,
	// then the driver's own lines from inside the AM: its splits over
	// the real HDFS, the gang, every rank, and the job's result under the
	// application's id.
	for _, want := range []string{
		"accepted; tracking URL: http",
		"its driver is in the ApplicationMaster",
		"running the job's driver in the ApplicationMaster",
		"planned splits",
		"gang granted", // the AM's own line
		"on_input_nodes=3",
		"executors launched",
		"all executors registered",
		"[rank 2]",
		"job " + app + " succeeded",
	} {
		if !strings.Contains(stdout+stderr, want) {
			t.Errorf("the gateway did not show %q:\n--- stdout\n%s\n--- stderr\n%s", want, stdout, stderr)
		}
	}
	stagingGone(t, hc, app)
}

// TestClusterModeFailure: a job that fails in cluster mode exits 1 on the
// gateway with the failure's reason (rank, exit status, its stderr), the
// application ends FAILED with the reason in its diagnostics, and local
// --files, --py-files and --archives (under its alias) reached the
// executors through the staging directory.
func TestClusterModeFailure(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "note.txt"), []byte("note-from-the-gateway\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "helper.py"), []byte("X = 1\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "pack"), 0o755)
	os.WriteFile(filepath.Join(dir, "pack", "inside.txt"), []byte("unpacked-from-the-archive\n"), 0o644)
	if out, err := exec.Command("tar", "-czf", filepath.Join(dir, "pack.tgz"), "-C", filepath.Join(dir, "pack"), "inside.txt").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	code, stdout, stderr := submitIn(t, dir, hc.ConfDir, 4*time.Minute,
		"--deploy-mode", "cluster", "--name", "fails", "--num-executors", "2", "--executor-memory", "256m",
		"--files", "note.txt", "--py-files", "helper.py", "--archives", "pack.tgz#stuff", "--",
		"sh", "-c", `cat "$SPINDLE_FILES_DIR/note.txt" stuff/inside.txt; test -f helper.py && echo py-file-here; if [ "$SPINDLE_RANK" = 1 ]; then echo boom-on-rank-1 >&2; exit 3; fi; sleep 30`)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"note-from-the-gateway", "unpacked-from-the-archive", "py-file-here", "rank 1", "exited with status 3", "boom-on-rank-1"} {
		if !strings.Contains(stdout+stderr, want) {
			t.Errorf("the gateway did not show %q:\n--- stdout\n%s\n--- stderr\n%s", want, stdout, stderr)
		}
	}
	if !strings.Contains(stderr, "spindle: job application_") || !strings.Contains(stderr, "failed: ") {
		t.Errorf("no failure line on the gateway:\n%s", stderr)
	}
	app, rep := report(t, hc, stderr)
	if rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_FAILED || !strings.Contains(rep.GetDiagnostics(), "exited with status 3") {
		t.Fatalf("ResourceManager reports %v with diagnostics %q", rep.GetFinalApplicationStatus(), rep.GetDiagnostics())
	}
	stagingGone(t, hc, app)
}

// TestClusterModeInterrupted: Ctrl-C on the gateway stops a cluster-mode
// application (final status KILLED), exits 130 and leaves no staging.
func TestClusterModeInterrupted(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	r := start(t, hc.ConfDir, "--deploy-mode", "cluster", "--name", "cluster-interrupted", "--num-executors", "2",
		"--executor-memory", "256m", "--", "sleep", "120")
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	// The driver's web UI, started in the AM after it registered, is the
	// application's tracking URL.
	status := exec.Command(spindleBin, "status", app)
	status.Env = env(hc.ConfDir)
	if out, err := status.CombinedOutput(); err != nil || !strings.Contains(string(out), "job's web UI http://127.0.0.1:") {
		t.Errorf("spindle status %s (%v):\n%s", app, err, out)
	}
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

// TestClusterModeBadInput: what cluster mode cannot do is refused before
// anything is submitted, with exit status 2.
func TestClusterModeBadInput(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "d.csv"), []byte("x,label\n1,0\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"relative input", []string{"--deploy-mode", "cluster", "--input", "data", "--", "true"}, "--input data is a path relative"},
		{"pushed input", []string{"--deploy-mode", "cluster", "--input", "flight-put:", "--", "true"}, "--input flight-put: (pushed input) does not work in --deploy-mode cluster"},
		{"pushed input at an address", []string{"--deploy-mode", "cluster", "--input", "flight-put://0.0.0.0:8815", "--", "true"},
			"--input flight-put://0.0.0.0:8815 (pushed input) does not work in --deploy-mode cluster"},
		{"unknown deploy mode", []string{"--deploy-mode", "moon", "--", "true"}, "spindle.submit.deployMode"},
		{"input that names nothing", []string{"--deploy-mode", "cluster", "--input", "hdfs:///no/such/data/*.parquet", "--", "true"},
			"hdfs:///no/such/data/*.parquet"},
		{"executor larger than any container", []string{"--deploy-mode", "cluster", "--executor-memory", "8g", "--", "true"},
			"--executor-memory 8g plus 128 MiB spindle.yarn.executor.memoryOverhead) but YARN's largest container is 4096 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := submitIn(t, dir, hc.ConfDir, time.Minute, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want 2 naming %q:\n%s", code, tc.want, stderr)
			}
			if appRE.MatchString(stderr) {
				t.Fatalf("an application was submitted:\n%s", stderr)
			}
		})
	}
}

// amPID finds the process of an application's first ApplicationMaster
// attempt by the CONTAINER_ID YARN put in its environment.
func amPID(t *testing.T, app string) int {
	t.Helper()
	rest := strings.TrimPrefix(app, "application_")
	re := regexp.MustCompile(`(^|\x00)CONTAINER_ID=container_(e\d+_)?` + regexp.QuoteMeta(rest) + `_01_000001\x00`)
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !re.Match(b) {
			continue
		}
		// The spindle process itself, not the shell YARN starts it with.
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if args := strings.Split(string(cmdline), "\x00"); len(args) >= 2 && filepath.Base(args[0]) == "spindle" && args[1] == "yarn-am" {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no ApplicationMaster process of %s", app)
	return 0
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

var registeredRE = regexp.MustCompile(`executor registered.*executor=(exec-\d+).* pid=(\d+)`)

// TestClusterModeSecondAttempt kills a cluster-mode job's
// ApplicationMaster, driver and all: YARN's second attempt runs the job
// again from the start and it succeeds, the gateway following the new
// attempt; the first attempt's executors are gone before the second
// gang registers (never two live gangs).
func TestClusterModeSecondAttempt(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	// Each rank of the first attempt leaves a mark and sleeps until the
	// ApplicationMaster is killed; the second attempt's ranks find their
	// marks and finish. A fixed sleep would race the kill on a busy
	// machine: the job could end before the test found its AM.
	marks := t.TempDir()
	eachRank := `mark="` + marks + `/rank-$SPINDLE_RANK"; if [ -e "$mark" ]; then exit 0; fi; touch "$mark"; exec sleep 600`
	r := start(t, hc.ConfDir, "--deploy-mode", "cluster", "--name", "second-attempt", "--num-executors", "2",
		"--executor-memory", "256m", "--conf", "spindle.yarn.maxAppAttempts=2", "--", "sh", "-c", eachRank)
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	// The gateway relays the ApplicationMaster's log as it reads it: a
	// registration may be printed after the line that all registered.
	var first []int
	testutil.WaitFor(t, 30*time.Second, func() error {
		first = first[:0]
		for _, m := range registeredRE.FindAllStringSubmatch(r.stderr.String(), -1) {
			pid, _ := strconv.Atoi(m[2])
			first = append(first, pid)
		}
		if len(first) != 2 {
			return fmt.Errorf("want 2 executors registered, got %v:\n%s", first, r.stderr.String())
		}
		return nil
	})
	// Kill only once both ranks run the command (and so have left marks).
	testutil.WaitFor(t, time.Minute, func() error {
		for _, n := range []string{"0", "1"} {
			if _, err := os.Stat(filepath.Join(marks, "rank-"+n)); err != nil {
				return fmt.Errorf("rank %s has not started its command: %w", n, err)
			}
		}
		return nil
	})
	if err := syscall.Kill(amPID(t, app), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, regexp.MustCompile(`YARN's next attempt runs the job again`), 2*time.Minute)
	r.waitFor(t, regexp.MustCompile(`(?s)next attempt runs the job again.*all executors registered`), 2*time.Minute)
	for _, pid := range first {
		if alive(pid) {
			t.Errorf("executor pid %d of the first attempt still runs beside the second attempt's gang", pid)
		}
	}
	if code := r.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d, want 0 from the second attempt:\n%s", code, r.stderr.String())
	}
	id, _ := client.ParseAppID(app)
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_SUCCEEDED {
		t.Fatalf("final status %v (%v)", rep.GetFinalApplicationStatus(), err)
	}
	stagingGone(t, hc, app)
}

// TestClientModeSecondAttempt: in client mode a new AM attempt cannot
// rejoin the driver on the gateway; it ends the application FAILED,
// saying so, without starting executors, and the job fails.
func TestClientModeSecondAttempt(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	r := start(t, hc.ConfDir, "--name", "client-second-attempt", "--num-executors", "2",
		"--executor-memory", "256m", "--conf", "spindle.yarn.maxAppAttempts=2", "--", "sleep", "120")
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	if err := syscall.Kill(amPID(t, app), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t, 3*time.Minute); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, r.stderr.String())
	}
	id, _ := client.ParseAppID(app)
	rep, err := rmClient(t, hc).Report(context.Background(), id)
	if err != nil || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_FAILED || !strings.Contains(rep.GetDiagnostics(), "cannot rejoin") {
		t.Fatalf("final status %v (%v), diagnostics %q:\n%s", rep.GetFinalApplicationStatus(), err, rep.GetDiagnostics(), r.stderr.String())
	}
	if n := len(registeredRE.FindAllString(r.stderr.String(), -1)); n != 2 {
		t.Errorf("%d executor registrations, want the first attempt's 2 only:\n%s", n, r.stderr.String())
	}
	stagingGone(t, hc, app)
}

// TestClusterModeKilled: spindle kill on a cluster-mode application ends
// the job saying who killed it, with exit status yarn.ExitKilled, and
// leaves no staging behind.
func TestClusterModeKilled(t *testing.T) {
	t.Parallel()
	hc := hadooptest.Shared(t)
	r := start(t, hc.ConfDir, "--deploy-mode", "cluster", "--name", "cluster-killed", "--num-executors", "2",
		"--executor-memory", "256m", "--", "sleep", "120")
	app := r.waitFor(t, appRE, time.Minute)[1]
	r.waitFor(t, regexp.MustCompile(`all executors registered`), 2*time.Minute)
	kill := exec.Command(spindleBin, "kill", app)
	kill.Env = env(hc.ConfDir)
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("spindle kill %s: %v\n%s", app, err, out)
	}
	want := "yarn application " + app + " was killed by " + currentUser() + " (yarn application -kill / spindle kill)"
	if code := r.wait(t, 2*time.Minute); code != yarn.ExitKilled || !strings.Contains(r.stderr.String(), want) ||
		strings.Contains(r.stderr.String(), "Ctrl-C again") {
		t.Fatalf("exit %d after spindle kill, want %d saying %q:\n%s", code, yarn.ExitKilled, want, r.stderr.String())
	}
	stagingGone(t, hc, app)
}
