package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rolecheckLine = regexp.MustCompile(`\[(\w+(?: \d+)?)\] rolecheck role=(\w+) index=(\d+) rank=(\d+) rows=(\d+) dialed=(\d+)`)

// roleLines returns rolecheck's report lines by output prefix ("worker 0").
func roleLines(out string) map[string][]string {
	lines := map[string][]string{}
	for _, m := range rolecheckLine.FindAllStringSubmatch(out, -1) {
		lines[m[1]] = m
	}
	return lines
}

// checkStopped fails when a process whose pid rolecheck recorded in dir
// (DIR/ROLE-INDEX.pid) is still alive after the job.
func checkStopped(t *testing.T, dir string, want int) {
	t.Helper()
	pids := readPids(t, dir)
	if len(pids) != want {
		t.Fatalf("%d pid files in %s, want %d", len(pids), dir, want)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("training process %d outlived the job", pid)
		}
	}
}

// A TF_CONFIG-reading job of 2 workers and 1 parameter server: each
// process finds its role in SPINDLE_ROLE and TF_CONFIG, every address in
// TF_CONFIG's cluster answers as the task it names, only the workers are
// fed (each its half), and the job ends when both workers have: the
// parameter server, which never exits on its own, is then stopped, and
// its stop is no failure.
func TestRolesWorkersAndPS(t *testing.T) {
	t.Parallel()
	const rows = 3000
	data := generate(t, "parquet", rows, 2)
	pids := t.TempDir()
	r := spindle(t, data, submitArgs("--master", "local[2]", "--num-ps", "1",
		"--ps-command", rolecheckBin+" -pid-dir "+pids,
		"--input", "*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "100", "--epochs", "2",
		"--conf", "spindle.feed.evenBatches=off", "--conf", "spindle.log.level=info",
		"--", rolecheckBin, "-pid-dir", pids)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	lines := roleLines(r.stdout)
	total := 0
	for _, name := range []string{"worker 0", "worker 1"} {
		m, ok := lines[name]
		if !ok {
			t.Fatalf("no report from %s:\n%s", name, r)
		}
		n, _ := strconv.Atoi(m[5])
		total += n
		if m[2] != "worker" || m[3] != name[len(name)-1:] || m[6] != "2" {
			t.Errorf("%s reported %q", name, m[0])
		}
	}
	if total != 2*rows {
		t.Errorf("the workers were fed %d rows over 2 epochs, want %d", total, 2*rows)
	}
	if m, ok := lines["ps 0"]; !ok || m[4] != "2" || m[5] != "0" {
		t.Errorf("ps report %q, want rank 2 with no rows:\n%s", m, r)
	}
	for _, want := range []string{`msg="job roles"`, `roles="worker=2 ps=1"`, `role=ps role_rank=0`, `stopped_at_end="ps 0"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("driver log lacks %s:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "failed") {
		t.Errorf("the stopped parameter server was reported as a failure:\n%s", r.stderr)
	}
	checkStopped(t, pids, 3)
}

// With a chief the job ends when the chief does, even though the workers
// (as in TensorFlow 2's parameter-server strategy) would serve forever:
// they and the parameter server are stopped.
func TestRolesChiefEndsTheJob(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 2000, 2)
	pids := t.TempDir()
	start := time.Now()
	r := spindle(t, data, submitArgs("--master", "local[2]", "--chief", "--num-ps", "1",
		"--ps-command", rolecheckBin+" -pid-dir "+pids,
		"--input", "*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "100",
		"--conf", "spindle.log.level=info",
		"--", rolecheckBin, "-pid-dir", pids, "-block", "worker,ps")...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	lines := roleLines(r.stdout)
	for name, rank := range map[string]string{"chief": "0", "worker 0": "1", "worker 1": "2", "ps 0": "3"} {
		if m, ok := lines[name]; !ok || m[4] != rank {
			t.Errorf("%s: report %q, want rank %s", name, m, rank)
		}
	}
	if m := lines["chief"]; m != nil && (m[5] != "0" || m[6] != "3") {
		t.Errorf("the chief was fed or did not reach every task: %q", m[0])
	}
	if !strings.Contains(r.stderr, `stopped_at_end="worker 0, worker 1, ps 0"`) {
		t.Errorf("driver log does not say the workers and ps were stopped at the end:\n%s", r.stderr)
	}
	checkStopped(t, pids, 4)
	t.Logf("chief job took %s", time.Since(start).Round(time.Millisecond))
}

// A parameter server that fails while the job runs fails the job, by name.
func TestRolesPSDiesEarly(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 1000, 1)
	r := spindle(t, data, submitArgs("--master", "local[2]", "--num-ps", "1", "--ps-command", rolecheckBin+" -exit 3",
		"--input", "*.parquet", "--label-column", "label", "--feed", "tensor",
		"--", rolecheckBin, "-block", "worker,ps")...)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (the job failed):\n%s", r.code, r)
	}
	if want := "ps 0 (rank 2, host 127.0.0.1, executor exec-2): parameter server exited with status 3 while the job ran"; !strings.Contains(r.stderr, want) {
		t.Fatalf("error does not name the parameter server (%q):\n%s", want, r)
	}
}

// A bad --ps-command or parameter-server setting is refused before
// anything runs, with exit status 2, naming it.
func TestRolesBadPSSettings(t *testing.T) {
	t.Parallel()
	r := spindle(t, t.TempDir(), submitArgs("--num-ps", "1", "--ps-command", "ps 'unclosed", "--feed", "direct", "--", rolecheckBin)...)
	if r.code != 2 || !strings.Contains(r.stderr, "--ps-command: spindle.ps.command: command \"ps 'unclosed\": unterminated single quote") {
		t.Fatalf("want exit 2 naming the bad --ps-command:\n%s", r)
	}
	r = spindle(t, t.TempDir(), submitArgs("--num-ps", "1", "--conf", "spindle.ps.staleness=often", "--feed", "direct", "--", rolecheckBin)...)
	if r.code != 2 || !strings.Contains(r.stderr, "spindle.ps.staleness") || !strings.Contains(r.stderr, `staleness "often"`) {
		t.Fatalf("want exit 2 naming spindle.ps.staleness:\n%s", r)
	}
}

// Locally, the GPUs of every role count against the machine's.
func TestRolesLocalGPUsCounted(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		t.Skip("this machine has a GPU")
	}
	r := spindle(t, t.TempDir(), submitArgs("--num-ps", "1", "--ps-command", rolecheckBin, "--ps-gpus", "1",
		"--feed", "direct", "--", rolecheckBin)...)
	wantUsageError(t, r, "--ps-gpus", "the job's executors need 1 GPUs (0 per worker or chief, 1 per parameter server); this machine has 0")
}

// tfPython returns the Python of the venv holding tensorflow-cpu, which
// scripts/install-deps.sh (make test) makes, or skips the test saying why.
func tfPython(t *testing.T) string {
	t.Helper()
	venv := os.Getenv("SPINDLE_TEST_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-test-venv")
	}
	py := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no test venv at %s (scripts/install-deps.sh makes it, with tensorflow-cpu): %v", venv, err)
	}
	return py
}

// A real TensorFlow job with ParameterServerStrategy: a chief that
// coordinates, 2 workers and 1 parameter server, each a TensorFlow server
// at the address TF_CONFIG gives it. The chief's training steps run on the
// workers against variables on the parameter server, and the job ends
// when the chief does; Spindle then stops the servers.
func TestTensorFlowParameterServerJob(t *testing.T) {
	t.Parallel()
	py := tfPython(t)
	script := filepath.Join(repoRoot, "examples", "tensorflow", "train_ps.py")
	start := time.Now()
	r := spindleEnv(t, t.TempDir(), []string{"TF_CPP_MIN_LOG_LEVEL=2"}, submitArgs("--master", "local[2]",
		"--chief", "--num-ps", "1", "--ps-command", py+" "+script, "--feed", "direct",
		"--conf", "spindle.driver.registrationTimeout=60s", "--conf", "spindle.log.level=info",
		"--", py, script, "--steps", "30")...)
	if r.code != 0 {
		t.Fatalf("TensorFlow job failed:\n%s", r)
	}
	m := regexp.MustCompile(`\[chief\] tfps steps=30 loss=(\S+) accuracy=(\S+) workers=2 ps=1`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no report from the chief:\n%s", r)
	}
	if acc, _ := strconv.ParseFloat(m[2], 64); acc < 0.9 {
		t.Errorf("accuracy %s after 30 steps, want >= 0.9 (the data is linearly separable)", m[2])
	}
	for _, want := range []string{"[worker 0] tfps worker 0 serving", "[worker 1] tfps worker 1 serving", "[ps 0] tfps ps 0 serving"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q line: a server did not start at its TF_CONFIG address:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stderr, `stopped_at_end="worker 0, worker 1, ps 0"`) {
		t.Errorf("the servers were not stopped at the job's end:\n%s", r.stderr)
	}
	t.Logf("TensorFlow job took %s", time.Since(start).Round(time.Millisecond))
}
