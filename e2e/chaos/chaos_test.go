package chaos

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/rowsum"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/testbed/faultproxy"
)

var spindleBin, logregBin, sparseLRBin, datagenBin, rowcheckBin, linkfaultBin, shrinkcheckBin, rowshrinkBin string

// torchScript is the PyTorch example the DDP fault runs;
// torchShrinkScript the PyTorch job that goes on in place.
var torchScript, torchShrinkScript string

// rowIDs is the glob of the row-id job's input (rowIDRows rows, id column).
var rowIDs string

const rowIDRows, rowIDEpochs = 24000, 4

func TestMain(m *testing.M) {
	if os.Getenv("SPINDLE_CHAOS") != "1" {
		fmt.Println("chaos harness skipped: set SPINDLE_CHAOS=1 (make chaos)")
		os.Exit(0)
	}
	// The package's binaries and TMPDIR, for what the tests and their
	// processes leave in it (a killed executor's socket directory).
	_, cleanup, err := testbin.Setup(context.Background(), "spindle-chaos-",
		testbin.Bin{Out: &spindleBin, Pkg: "./cmd/spindle"}, testbin.Bin{Out: &logregBin, Pkg: "./examples/logreg"},
		testbin.Bin{Out: &sparseLRBin, Pkg: "./examples/sparse-lr"}, testbin.Bin{Out: &datagenBin, Pkg: "./examples/datagen"},
		testbin.Bin{Out: &rowcheckBin, Pkg: "./e2e/rowcheck"}, testbin.Bin{Out: &linkfaultBin, Pkg: "./e2e/linkfault"},
		testbin.Bin{Out: &shrinkcheckBin, Pkg: "./e2e/shrinkcheck"}, testbin.Bin{Out: &rowshrinkBin, Pkg: "./e2e/rowshrink"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root := testbin.Root()
	torchScript = filepath.Join(root, "examples", "pytorch", "train.py")
	torchShrinkScript = filepath.Join(root, "e2e", "torchshrink", "train.py")
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// deadline is a run's hard limit: a run still going then is a hang.
const deadline = 2 * time.Minute

// fault is one kind of kill and the job it is tried on.
type fault struct {
	name string
	// args are spindle's arguments for a job in dir over data.
	args func(dir, data string) []string
	// victims lists the candidate processes once the job runs; want is
	// how many make the job "running".
	victims func(run *exec.Cmd) []int
	want    int
	// recovers says the job must end with exit 0; otherwise it must
	// fail, naming what went, and leave nothing behind.
	recovers bool
	// check looks at a recovered job's output: its model must be as good
	// as an undisturbed run's, or its rows fed exactly once per epoch.
	check func(stdout string) error
	// again, when set, lists the processes whose return (againWant new
	// ones) marks the job's recovery, instead of the victims' (a killed
	// worker or master does not come back by itself).
	again     func() []int
	againWant int
	// link, when set, is a network fault instead of a kill: the executors
	// reach the driver through a fault proxy, which is put in mode for
	// the duration, then passes again.
	link *linkFault
	// kill, when set, does the fault to victim v (what victims listed: a
	// pid, or a datanode's or NodeManager's index) instead of a SIGKILL,
	// and says what it did.
	kill func(v int) string
	// env, when set, is added to the job's environment.
	env func() []string
	// peers, when set, is a network fault between two training processes
	// (the job runs them under e2e/linkfault) instead of a kill.
	peers *peerFault
	// checkStderr, when set, also looks at a recovered job's stderr.
	checkStderr func(stderr string) error
	// alone says the killed process's role recovers by one new process
	// beside the others (a replacement), not by a new generation.
	alone bool
	// ready, when set, must match the job's output before the kill (the
	// ranks are training, not still joining).
	ready *regexp.Regexp
	// trained, when set, marks the recovery instead of the victims' role
	// running again: the job's output matches it (the replacement trains).
	trained *regexp.Regexp
}

// linkFault is a fault of the control plane between executors and driver.
type linkFault struct {
	mode faultproxy.Mode
	dur  time.Duration
}

// rowChecks counts the epochs whose row-id checksums were checked, and
// those that were wrong, over the harness's runs.
var rowChecks struct{ epochs, wrong int }

// rowsOnce checks rowcheck's final lines: every epoch took each row id
// exactly once over the ranks (rowsum.Check).
func rowsOnce(stdout string) error {
	n, err := rowsum.Check(stdout, 2, rowIDEpochs, rowIDRows)
	rowChecks.epochs += n
	if err != nil {
		rowChecks.wrong += max(1, strings.Count(err.Error(), "epoch "))
	}
	return err
}

// startedLine is rowcheck's first line in each process.
var startedLine = regexp.MustCompile(`rowcheck rank=(\d+) pid=(\d+) generation=(\d+) replacement=(\d+) started`)

// replacedAlone checks a 4-rank row-id job that replaced a lost worker:
// one rank started a second process, its replacement, and the other
// three kept theirs (one process each, in generation 0); every epoch
// took each row exactly once.
func replacedAlone(stdout string) error {
	starts := map[string][]string{}
	for _, m := range startedLine.FindAllStringSubmatch(stdout, -1) {
		starts[m[1]] = append(starts[m[1]], "pid "+m[2]+" generation "+m[3]+" replacement "+m[4])
	}
	replaced := 0
	for rank := range 4 {
		got := starts[strconv.Itoa(rank)]
		switch {
		case len(got) == 2 && strings.HasSuffix(got[1], "generation 0 replacement 1"):
			replaced++
		case len(got) != 1:
			return fmt.Errorf("rank %d started %v: want one process, or one and its replacement", rank, got)
		}
	}
	if replaced != 1 {
		return fmt.Errorf("%d ranks were replaced, want 1 (%v)", replaced, starts)
	}
	n, err := rowsum.Check(stdout, 4, rowIDEpochs, rowIDRows)
	rowChecks.epochs += n
	if err != nil {
		rowChecks.wrong += max(1, strings.Count(err.Error(), "epoch "))
	}
	return err
}

// writeRowIDs writes the row-id job's input: rowIDRows ids in 3 CSV files.
func writeRowIDs(dir string) (string, error) {
	per := rowIDRows / 3
	for f := range 3 {
		var b strings.Builder
		b.WriteString("id,x\n")
		for id := f * per; id < (f+1)*per; id++ {
			fmt.Fprintf(&b, "%d,%d\n", id, id%5)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("ids-%d.csv", f)), []byte(b.String()), 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "ids-*.csv"), nil
}

var (
	logregFinal = regexp.MustCompile(`final rank=\d+ epochs=\d+ loss=\S+ accuracy=(\S+)`)
	sparseLine  = regexp.MustCompile(`sparse-lr: auc (\S+) \(known model (\S+)\)`)
)

func logregGood(stdout string) error {
	m := logregFinal.FindAllStringSubmatch(stdout, -1)
	if len(m) < 2 {
		return fmt.Errorf("%d ranks reported a final model, want 2", len(m))
	}
	// The last generation's: ranks cut off from the driver by a network
	// fault may have finished too before they were stopped.
	m = m[len(m)-2:]
	for _, r := range m {
		// The data's Bayes accuracy is about 0.84; an undisturbed run ends at 0.83 to 0.84.
		if acc, _ := strconv.ParseFloat(r[1], 64); acc < 0.8 {
			return fmt.Errorf("final accuracy %s, an undisturbed run reaches 0.83", r[1])
		}
	}
	return nil
}

func sparseGood(stdout string) error {
	m := sparseLine.FindStringSubmatch(stdout)
	if m == nil {
		return fmt.Errorf("no result line")
	}
	a, _ := strconv.ParseFloat(m[1], 64)
	k, _ := strconv.ParseFloat(m[2], 64)
	if math.Abs(a-k) > 0.01 {
		return fmt.Errorf("AUC %.4f, not within 0.01 of the known model's %.4f", a, k)
	}
	return nil
}

// python runs the PyTorch fault: Debian's, which has torch.
const python = "/usr/bin/python3"

// torchFinal is a rank's last line in the PyTorch example.
var torchFinal = regexp.MustCompile(`\[rank (\d)\] final rank=\d loss=\S+ accuracy=(\S+) params_sha256=([0-9a-f]+)`)

// torchGood checks that both ranks of the PyTorch job ended with the same
// model, as accurate as an undisturbed run's (0.8 and above on this data).
func torchGood(stdout string) error {
	finals := torchFinal.FindAllStringSubmatch(stdout, -1)
	if len(finals) != 2 {
		return fmt.Errorf("%d final lines, want one from each of 2 ranks", len(finals))
	}
	if finals[0][3] != finals[1][3] {
		return fmt.Errorf("the ranks ended with different models")
	}
	for _, f := range finals {
		if acc, _ := strconv.ParseFloat(f[2], 64); acc < 0.8 {
			return fmt.Errorf("rank %s accuracy %s, want ≥ 0.8", f[1], f[2])
		}
	}
	return nil
}

func faults() []fault {
	restart := []string{"--conf", "spindle.failure.policy=restart", "--conf", "spindle.failure.maxRestarts=2"}
	logreg := func(dir, data string) []string {
		return append(append([]string{"submit", "--master", "local[2]", "--conf", "spindle.log.level=warn",
			"--input", data + "/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "256",
			"--epochs", "12", "--checkpoint-dir", filepath.Join(dir, "ckpt")}, restart...), "--", logregBin, "--lr", "0.5")
	}
	sparse := func(extra ...string) func(dir, data string) []string {
		return func(dir, data string) []string {
			args := []string{"submit", "--master", "local[2]", "--conf", "spindle.log.level=warn", "--checkpoint-dir", filepath.Join(dir, "ckpt")}
			args = append(args, extra...)
			return append(args, "--", sparseLRBin, "--rows", "200000")
		}
	}
	rows := func(dir, _ string) []string {
		return append(append([]string{"submit", "--master", "local[2]", "--conf", "spindle.log.level=warn",
			"--input", rowIDs, "--label-column", "id", "--feed", "tensor", "--batch-rows", "40", "--shuffle", "--seed", "3",
			"--epochs", strconv.Itoa(rowIDEpochs), "--checkpoint-dir", filepath.Join(dir, "ckpt")}, restart...),
			"--", rowcheckBin, "--every", "10", "--pause", "2ms", "--crash-after", "0")
	}
	// rows4 is the row-id job on 4 ranks that replaces a lost worker alone.
	rows4 := func(dir, _ string) []string {
		return append(append([]string{"submit", "--master", "local[4]", "--conf", "spindle.log.level=warn",
			"--input", rowIDs, "--label-column", "id", "--feed", "tensor", "--batch-rows", "20", "--shuffle", "--seed", "3",
			"--epochs", strconv.Itoa(rowIDEpochs), "--checkpoint-dir", filepath.Join(dir, "ckpt")}, restart...),
			"--conf", "spindle.failure.replaceWorkers=true", "--", rowcheckBin, "--every", "10", "--pause", "2ms", "--crash-after", "0")
	}
	return []fault{
		replacedLogreg(restart),
		replacedLogregExecutor(restart),
		restartedLogreg(restart),
		elasticShrink(),
		elasticRestart(),
		elasticShrinkInput(),
		elasticRestartInput(),
		torchShrink(),
		torchRestart(),
		torchReplaced(),
		torchRestarted(),
		{name: "worker replaced: training rank of 4 (row ids)", args: rows4, want: 4, recovers: true, alone: true, check: replacedAlone,
			victims: func(*exec.Cmd) []int { return pids(rowcheckBin) }},
		{name: "worker replaced: executor of 4 (row ids)", args: rows4, want: 4, recovers: true, alone: true, check: replacedAlone,
			victims: func(*exec.Cmd) []int { return pids(spindleBin, "executor") }},
		{name: "training rank (row ids)", args: rows, want: 2, recovers: true, check: rowsOnce,
			victims: func(*exec.Cmd) []int { return pids(rowcheckBin) }},
		{name: "executor (row ids)", args: rows, want: 2, recovers: true, check: rowsOnce,
			victims: func(*exec.Cmd) []int { return pids(spindleBin, "executor") }},
		{name: "training rank", args: logreg, want: 2, recovers: true, check: logregGood,
			victims: func(*exec.Cmd) []int { return pids(logregBin) }},
		{name: "executor", args: logreg, want: 2, recovers: true, check: logregGood,
			victims: func(*exec.Cmd) []int { return pids(spindleBin, "executor") }},
		{name: "parameter server", args: sparse("--num-ps", "3"), want: 3, recovers: true, check: sparseGood,
			victims: func(*exec.Cmd) []int { return pids(spindleBin, "ps", "serve") }},
		{name: "parameter-server worker", want: 2, recovers: true, check: sparseGood,
			args: func(dir, data string) []string {
				a := sparse(append([]string{"--num-ps", "2"}, restart...)...)(dir, data)
				return append(a, "--checkpoint-every", "40")
			},
			victims: func(*exec.Cmd) []int { return pids(sparseLRBin) }},
		{name: "driver link paused 1s", args: logreg, want: 2, recovers: true, check: logregGood,
			link: &linkFault{faultproxy.Pause, time.Second}, victims: func(*exec.Cmd) []int { return pids(logregBin) }},
		{name: "driver link dropped 1s", args: logreg, want: 2, recovers: true, check: logregGood,
			link: &linkFault{faultproxy.Drop, time.Second}, victims: func(*exec.Cmd) []int { return pids(logregBin) }},
		{name: "driver link blackholed 5s", args: logreg, want: 2, recovers: true, check: logregGood,
			link: &linkFault{faultproxy.Blackhole, 5 * time.Second}, victims: func(*exec.Cmd) []int { return pids(logregBin) }},
		{name: "PyTorch DDP rank", want: 2, recovers: true, check: torchGood,
			args: func(dir, data string) []string {
				files, _ := filepath.Glob(filepath.Join(data, "*.parquet"))
				return append(append([]string{"submit", "--master", "local[2]", "--conf", "spindle.log.level=warn",
					"--input", files[0], "--label-column", "label", "--feed", "tensor", "--batch-rows", "256",
					"--epochs", "3", "--checkpoint-dir", filepath.Join(dir, "ckpt")}, restart...), "--", python, torchScript, "--threads", "1")
			},
			victims: func(*exec.Cmd) []int { return pids(python, torchScript) }},
		{name: "driver", args: logreg, want: 1, recovers: false,
			victims: func(run *exec.Cmd) []int { return []int{run.Process.Pid} }},
	}
}

// pids lists the processes whose command line starts with args.
func pids(args ...string) []int {
	want := []byte(strings.Join(args, "\x00"))
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, want) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// leftovers lists the job processes still alive: training programs,
// executors, parameter servers.
func leftovers() []int {
	return slices.Concat(pids(linkfaultBin), pids(logregBin), pids(sparseLRBin), pids(rowcheckBin), pids(shrinkcheckBin), pids(rowshrinkBin), pids(python, torchScript), pids(python, torchShrinkScript),
		pids(spindleBin, "executor"), pids(spindleBin, "ps", "serve"))
}

// outcome is one run.
type outcome struct {
	fault     string
	killed    string
	recovered bool          // the job ended as its policy promises
	named     bool          // a failure named what went
	hang      bool          // past the deadline
	left      int           // processes left behind
	recovery  time.Duration // kill to the victims' role running again; 0 when not measured
	restarts  int           // generations the driver started after the first
	why       string        // the first restart's reason
	problem   string
	elapsed   time.Duration // from submit to the job's end
}

// restartLine is the driver's console line for each new generation.
var restartLine = regexp.MustCompile(`; restarting every rank \(`)

// firstRestart takes the reason of the first restart, and the failed
// process's last lines of stderr that follow it, indented.
var firstRestart = regexp.MustCompile(`failed: (.*); restarting every rank \([^\n]*((?:\n    [^\n]*)*)`)

func TestChaos(t *testing.T) {
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("SPINDLE_CHAOS_RUNS")); err == nil && v > 0 {
		runs = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SPINDLE_CHAOS_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (SPINDLE_CHAOS_SEED replays it), %d runs per fault", seed, runs)
	rng := rand.New(rand.NewPCG(seed, 1))
	data := t.TempDir()
	if out, err := exec.Command(datagenBin, "--out", data, "--rows", "400000", "--features", "16", "--files", "4",
		"--format", "parquet", "--seed", "7").CombinedOutput(); err != nil {
		t.Fatalf("datagen: %v\n%s", err, out)
	}
	var err error
	if rowIDs, err = writeRowIDs(data); err != nil {
		t.Fatal(err)
	}
	var all []outcome
	only := os.Getenv("SPINDLE_CHAOS_ONLY")
	hasTorch := exec.Command(python, "-c", "import torch").Run() == nil
	for _, f := range append(faults(), peerFaults()...) {
		if only != "" && !strings.Contains(f.name, only) {
			continue
		}
		if f.check != nil && strings.Contains(f.name, "PyTorch") && !hasTorch {
			t.Logf("%s skipped: %s cannot import torch (make deps installs python3-torch)", f.name, python)
			continue
		}
		for i := range runs {
			o := runOne(t, f, data, rng)
			logRun(t, f, i, o)
			all = append(all, o)
		}
	}
	sc := &standaloneCluster{}
	for _, f := range standaloneFaults(sc) {
		if only != "" && !strings.Contains(f.name, only) {
			continue
		}
		if sc.t == nil { // started for the first standalone fault
			t.Setenv("SPINDLE_CLUSTER_SECRET", clusterSecret)
			sc.start(t)
		}
		for i := range runs {
			sc.ensure() // a member the last run killed is back
			o := runOne(t, f, data, rng)
			logRun(t, f, i, o)
			all = append(all, o)
		}
	}
	hs := &hadoopSite{}
	for _, f := range hadoopFaults(hs) {
		if only != "" && !strings.Contains(f.name, only) {
			continue
		}
		if hs.t == nil { // started for the first Hadoop fault
			hs.start(t)
		}
		for i := range runs {
			hs.ensure(strings.HasPrefix(f.name, "YARN"))
			o := runOne(t, f, data, rng)
			logRun(t, f, i, o)
			all = append(all, o)
		}
	}
	rs := &realSite{}
	for _, f := range realHadoopFaults(rs) {
		if only != "" && !strings.Contains(f.name, only) {
			continue
		}
		rs.t = t
		for i := range runs {
			rs.ensure(f.name == "real Hadoop NodeManager")
			o := runOne(t, f, data, rng)
			logRun(t, f, i, o)
			all = append(all, o)
		}
	}
	report := summarize(all) + fmt.Sprintf("\nrow-id checksums: %d epochs checked, %d with a row lost or fed twice\n", rowChecks.epochs, rowChecks.wrong)
	t.Log("\n" + report)
	if path := os.Getenv("SPINDLE_CHAOS_REPORT"); path != "" {
		os.WriteFile(path, []byte(report), 0o644)
	}
	for _, o := range all {
		if o.hang || o.left > 0 || (!o.recovered && !o.named) || o.problem != "" {
			t.Errorf("%s: killed %s: %s (hang=%v left=%d)", o.fault, o.killed, o.problem, o.hang, o.left)
		}
	}
}

func runOne(t *testing.T, f fault, data string, rng *rand.Rand) outcome {
	o := outcome{fault: f.name}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	args := f.args(dir, data)
	var proxy *faultproxy.Proxy
	if f.link != nil {
		// The executors reach the driver through the proxy; heartbeats
		// every 200ms, an executor silent for 3s is lost.
		port := testaddr.Free(t)
		var err error
		if proxy, err = faultproxy.New("127.0.0.1:0", port); err != nil {
			t.Fatal(err)
		}
		pctx, stopProxy := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- proxy.Serve(pctx) }()
		defer func() {
			stopProxy()
			if err := <-served; err != nil {
				t.Error(err)
			}
		}()
		_, p, _ := strings.Cut(port, ":")
		_, q, _ := strings.Cut(proxy.Addr(), ":")
		args = slices.Insert(args, slices.Index(args, "--"), "--conf", "spindle.driver.port="+p, "--conf", "spindle.driver.advertisePort="+q,
			"--conf", "spindle.executor.heartbeatInterval=200ms", "--conf", "spindle.executor.heartbeatTimeout=3s")
	}
	cmd := exec.CommandContext(ctx, spindleBin, args...)
	cmd.Dir = dir
	if f.env != nil {
		cmd.Env = append(os.Environ(), f.env()...)
	}
	var stdout syncbuf.Buffer
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	submitted := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Wait for the job to run, then kill one victim after a random delay.
	var victims []int
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(20 * time.Millisecond) {
		if victims = f.victims(cmd); len(victims) >= f.want && (f.ready == nil || f.ready.MatchString(stdout.String())) {
			break
		}
	}
	var killedAt time.Time
	if len(victims) >= f.want {
		time.Sleep(time.Duration(200+rng.IntN(1000)) * time.Millisecond)
		if victims = f.victims(cmd); len(victims) > 0 && f.link != nil {
			o.killed = fmt.Sprintf("the driver link (%s for %s)", f.link.mode, f.link.dur)
			proxy.Set(f.link.mode)
			time.Sleep(f.link.dur) // the fault's duration, not a wait for something
			proxy.Set(faultproxy.Pass)
			killedAt = time.Now() // recovery counts from the link's return
		} else if len(victims) > 0 && f.peers != nil {
			o.killed = f.peers.String()
			f.peers.apply(dir)
			time.Sleep(f.peers.dur) // the fault's duration, not a wait for something
			f.peers.clear(dir)
			killedAt = time.Now()
		} else if len(victims) > 0 && f.kill != nil {
			o.killed = f.kill(victims[rng.IntN(len(victims))])
			killedAt = time.Now()
		} else if len(victims) > 0 {
			v := victims[rng.IntN(len(victims))]
			o.killed = fmt.Sprintf("%s pid %d", f.name, v)
			syscall.Kill(v, syscall.SIGKILL)
			killedAt = time.Now()
		}
	}
	if o.killed == "" {
		o.problem = "the job ended before a victim could be killed"
	}
	// Recovery: the victims' role running again, every one a new process.
	if f.recovers && !killedAt.IsZero() {
		before, watch, want := victims, func() []int { return f.victims(cmd) }, f.want
		if f.again != nil {
			before, watch, want = f.again(), f.again, f.againWant
		}
		for time.Since(killedAt) < 30*time.Second {
			now := watch()
			fresh := 0
			for _, p := range now {
				if !slices.Contains(before, p) {
					fresh++
				}
			}
			if f.trained != nil && f.trained.MatchString(stdout.String()) {
				o.recovery = time.Since(killedAt)
				break
			}
			if f.trained == nil && (fresh >= want || (len(now) >= want && fresh >= 1 && (strings.HasPrefix(f.name, "executor") || f.name == "parameter server" || f.alone))) {
				// Every rank of a new generation runs, or (an executor, a
				// parameter server) a replacement runs beside the others.
				o.recovery = time.Since(killedAt)
				break
			}
			select {
			case err := <-done:
				done <- err
				goto ended
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
ended:
	select {
	case <-done:
	case <-ctx.Done():
		o.hang = true
		<-done
	}
	code := cmd.ProcessState.ExitCode()
	o.elapsed = time.Since(submitted)
	o.restarts = len(restartLine.FindAllString(stderr.String(), -1))
	if m := firstRestart.FindStringSubmatch(stderr.String()); m != nil {
		o.why = m[1] + strings.ReplaceAll(m[2], "\n    ", " | ")
	}
	switch {
	case f.recovers:
		o.recovered = code == 0
		if !o.recovered {
			o.problem = fmt.Sprintf("exit %d; stderr: %s", code, lastLines(stderr.String(), 6))
		} else if err := f.check(stdout.String()); err != nil {
			o.problem = err.Error()
		} else if f.checkStderr != nil {
			if err := f.checkStderr(stderr.String()); err != nil {
				o.problem = err.Error()
			}
		}
	default:
		// A killed driver: its executors fence themselves.
		o.named = true
	}
	if code != 0 && f.recovers && regexp.MustCompile(`failed: \S+ \d+ \(rank \d+`).MatchString(stderr.String()) {
		o.named = true
	}
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(100 * time.Millisecond) {
		if o.left = len(leftovers()); o.left == 0 {
			break
		}
	}
	if o.left > 0 {
		for _, p := range leftovers() {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	return o
}

// logRun logs run i of fault f.
func logRun(t *testing.T, f fault, i int, o outcome) {
	t.Helper()
	why := ""
	if o.why != "" {
		why = " (first restart: " + o.why + ")"
	}
	t.Logf("%-24s run %d: killed %s; recovered=%v named=%v hang=%v left=%d restarts=%d recovery=%s job=%s %s%s",
		f.name, i+1, o.killed, o.recovered, o.named, o.hang, o.left, o.restarts, o.recovery.Round(time.Millisecond), o.elapsed.Round(100*time.Millisecond), o.problem, why)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// summarize writes the report: per fault, runs, recoveries, named
// failures, hangs, leftovers, and recovery p50/p95.
func summarize(all []outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| fault (SIGKILL, or the driver link's) | runs | recovered | failed, named | hangs | processes left | restarts | recovery p50 | recovery p95 |\n|---|---|---|---|---|---|---|---|---|\n")
	var order []string
	by := map[string][]outcome{}
	for _, o := range all {
		if _, ok := by[o.fault]; !ok {
			order = append(order, o.fault)
		}
		by[o.fault] = append(by[o.fault], o)
	}
	for _, name := range order {
		os := by[name]
		var rec, named, hangs, left, restarts int
		var times []time.Duration
		for _, o := range os {
			if o.recovered {
				rec++
			}
			if o.named && !o.recovered {
				named++
			}
			if o.hang {
				hangs++
			}
			left += o.left
			restarts += o.restarts
			if o.recovery > 0 {
				times = append(times, o.recovery)
			}
		}
		p50, p95 := "–", "–"
		if len(times) > 0 {
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			p50 = times[len(times)/2].Round(10 * time.Millisecond).String()
			p95 = times[min(len(times)-1, int(math.Ceil(0.95*float64(len(times))))-1)].Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %s | %s |\n", name, len(os), rec, named, hangs, left, restarts, p50, p95)
	}
	return b.String()
}
