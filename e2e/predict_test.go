package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/model/predict/predicttest"
	"github.com/spindle-ml/spindle/model/store"
	"github.com/spindle-ml/spindle/testbed/flighttest"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// predictData writes rows rows of scoring data in files Parquet files
// (row groups of groupRows): a key, a string, three features of
// different types and a label.
const predictData = `
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
out, rows, files, group = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(7)
per = rows // files
for i in range(files):
    ids = np.arange(i * per, (i + 1) * per, dtype=np.int64)
    pq.write_table(pa.table({"id": ids, "name": [f"c{j}" for j in ids], "f0": rng.normal(size=per),
                             "f1": rng.normal(size=per).astype(np.float32), "f2": rng.integers(0, 5, size=per),
                             "label": rng.integers(0, 2, size=per)}),
                   f"{out}/part-{i:03d}.parquet", row_group_size=group)
`

// predictCheck scores the input with ONNX Runtime in this process and
// compares with spindle predict's output: every key once, the kept
// columns intact, every score within 1e-5.
const predictCheck = `
import sys, numpy as np, pyarrow.dataset as ds, onnxruntime as ort
inp = ds.dataset(sys.argv[1], format="parquet").to_table()
out = ds.dataset(sys.argv[2], format="parquet").to_table()
sess = ort.InferenceSession(sys.argv[3], providers=["CPUExecutionProvider"])
assert out.column_names == ["id", "name", "label", "score"], out.column_names
ids = out.column("id").to_numpy()
if len(ids) != inp.num_rows or len(np.unique(ids)) != len(ids):
    sys.exit(f"output has {len(ids)} rows, {len(np.unique(ids))} distinct keys; input {inp.num_rows}")
x = np.column_stack([inp.column(c).to_numpy().astype(np.float32) for c in ["f0", "f1", "f2"]])
ref = sess.run(None, {"features": x})[0][:, 0]
a, b = np.argsort(inp.column("id").to_numpy()), np.argsort(ids)
got = out.column("score").to_numpy()[b]
names_ok = [str(v) for v in out.column("name").to_pylist()] == [f"c{j}" for j in ids]
diff = float(np.abs(got - ref[a]).max())
print(f"rows={len(ids)} maxdiff={diff:.3g} names_ok={names_ok}")
if diff > 1e-5 or not names_ok:
    sys.exit("scores or kept columns differ")
`

// predictPython returns the test venv's Python with pyarrow and
// onnxruntime (scripts/install-deps.sh installs them), or skips.
func predictPython(t *testing.T) string {
	t.Helper()
	py := tfPython(t)
	if out, err := exec.Command(py, "-c", "import pyarrow, onnxruntime").CombinedOutput(); err != nil {
		t.Skipf("%s lacks pyarrow or onnxruntime (scripts/install-deps.sh installs them): %v\n%s", py, err, out)
	}
	return py
}

// predictSetup writes the data set and a logistic-regression model.
func predictSetup(t *testing.T, py string, rows, files, group int) (data, model string) {
	t.Helper()
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	runPython(t, py, predictData, data, strconv.Itoa(rows), strconv.Itoa(files), strconv.Itoa(group))
	model = filepath.Join(dir, "logreg.onnx")
	m := predicttest.LogReg{Input: "features", Output: "score", W: []float32{0.8, -1.5, 0.25}, B: -0.3}
	if err := m.Write(model); err != nil {
		t.Fatal(err)
	}
	return data, model
}

func runPython(t *testing.T, py, script string, args ...string) string {
	t.Helper()
	out, err := exec.Command(py, append([]string{"-c", script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}

func predictArgs(py, model, data, out string, extra ...string) []string {
	args := []string{"predict", "--master", "local[2]", "--model", model, "--input", data, "--output", out,
		"--keep", "id,name,label", "--python", py}
	return append(append(args, fastConf()...), extra...)
}

// TestPredict publishes a model in a model store, scores a data set with
// it on two executors (the manifest says which columns feed it) and
// compares every score with ONNX Runtime's in this process.
func TestPredict(t *testing.T) {
	t.Parallel()
	py := predictPython(t)
	data, model := predictSetup(t, py, 30000, 3, 4000)
	ctx := context.Background()
	storeDir := filepath.Join(t.TempDir(), "models")
	s, err := store.OpenURI(ctx, fsys.NewResolver(fsys.Options{}), storeDir)
	if err != nil {
		t.Fatal(err)
	}
	onnxBytes, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	man := store.Manifest{Format: store.FormatONNX,
		Inputs:  []store.Tensor{{Name: "features", Type: "float", Shape: []int64{-1, 3}}},
		Outputs: []store.Tensor{{Name: "score", Type: "float", Shape: []int64{-1, 1}}},
		Feed:    &store.Feed{Schema: []store.Column{{Name: "f0"}, {Name: "f1"}, {Name: "f2"}, {Name: "label"}}, Label: "label"}}
	if _, err := s.Publish(ctx, "ctr", []store.Source{store.BytesSource(store.ModelFile, onnxBytes)}, man); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "scores")
	r := spindle(t, t.TempDir(), predictArgs(py, storeDir+"/ctr/1", data, out, "--batch-rows", "3000")...)
	if r.code != 0 {
		t.Fatalf("spindle predict failed:\n%s", r)
	}
	if !strings.Contains(r.stderr, "wrote 30000 rows to "+out) {
		t.Errorf("no row count reported:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(out, "_SUCCESS")); err != nil {
		t.Errorf("no _SUCCESS: %v", err)
	}
	t.Log(runPython(t, py, predictCheck, data, out, model))
}

// TestPredictBadInput: each bad input exits 2 with one line naming it,
// before any executor runs.
func TestPredictBadInput(t *testing.T) {
	t.Parallel()
	py := predictPython(t)
	data, model := predictSetup(t, py, 200, 1, 100)
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	os.Mkdir(full, 0o755)
	os.WriteFile(filepath.Join(full, "old.parquet"), []byte("x"), 0o644)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	notModel := filepath.Join(dir, "notes.onnx")
	os.WriteFile(notModel, []byte("not a model\n"), 0o644)
	out := filepath.Join(dir, "scores")

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing model", predictArgs(py, filepath.Join(dir, "nope.onnx"), data, out), []string{"--model", "nope.onnx"}},
		{"missing model version", predictArgs(py, "ctr/4", data, out, "--conf", "spindle.models.dir="+dir), []string{"--model ctr/4", "ctr"}},
		{"not a model", predictArgs(py, notModel, data, out), []string{"notes.onnx", "ONNX"}},
		{"model input the feed lacks", predictArgs(py, model, data, out, "--columns", "f0,f1,f9"), []string{"features", "f9", data}},
		{"type mismatch", predictArgs(py, model, data, out, "--columns", "f0,name,f2"), []string{"features", "float", "name", "utf8"}},
		{"wrong feature count", predictArgs(py, model, data, out, "--columns", "f0,f1"), []string{"features", "3 columns", "gives 2"}},
		{"missing input", predictArgs(py, model, filepath.Join(dir, "nothing.parquet"), out, "--columns", "f0,f1,f2"), []string{"nothing.parquet"}},
		{"default features do not fit", predictArgs(py, model, data, out, "--keep", "id,name"), []string{"features", "3 columns", "f0,f1,f2,label", "--columns"}},
		{"non-empty output", predictArgs(py, model, data, full, "--columns", "f0,f1,f2"), []string{"--output", full, "not empty", "--overwrite"}},
		{"output under a file", predictArgs(py, model, data, filepath.Join(file, "scores"), "--columns", "f0,f1,f2"), []string{"--output", file}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := spindle(t, dir, tc.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2:\n%s", r.code, r)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if strings.HasPrefix(l, "spindle: ") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 {
				t.Fatalf("want one error line:\n%s", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("error %q does not name %q", lines[0], w)
				}
			}
			if strings.Contains(r.stderr, "wrote") || strings.Contains(r.stderr, "executors launched") {
				t.Errorf("the job ran despite the bad input:\n%s", r)
			}
		})
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("a refused run touched the existing output: %v", entries)
	}
}

// TestPredictKilledExecutor kills an executor while its rank has
// published some of its files and not others, with both workers frozen so
// that the moment is certain. The job restarts its gang, the splits are
// scored again and replace their files, and the output holds every row
// exactly once with the right scores.
func TestPredictKilledExecutor(t *testing.T) {
	t.Parallel()
	py := predictPython(t)
	data, model := predictSetup(t, py, 120000, 12, 5000)
	work := t.TempDir()
	out := filepath.Join(t.TempDir(), "scores")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, spindleBin, predictArgs(py, model, data, out, "--columns", "f0,f1,f2", "--batch-rows", "500",
		"--conf", "spindle.failure.maxRestarts=2", "--conf", "spindle.log.level=info")...)
	cmd.Dir = work
	cmd.Env = testEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// The workers of this job: python -m spindle.predict running in work.
	workers := func() []int {
		var mine []int
		for _, pid := range cmdlinePids(py, "-m", "spindle.predict") {
			if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); cwd == work {
				mine = append(mine, pid)
			}
		}
		return mine
	}
	budget := testutil.NewBudget(time.Minute)
	var frozen []int
	for frozen == nil {
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) before a split was published:\n%s", err, stderr.String())
		default:
		}
		if budget.Spent() {
			t.Fatalf("no split published within %s:\n%s", budget, stderr.String())
		}
		parts, _ := filepath.Glob(filepath.Join(out, "*.parquet"))
		if ws := workers(); len(parts) > 0 && len(ws) == 2 {
			for _, pid := range ws {
				syscall.Kill(pid, syscall.SIGSTOP)
			}
			frozen = ws
			break
		}
		time.Sleep(5 * time.Millisecond) // polling the output, not synchronising
	}
	parts, _ := filepath.Glob(filepath.Join(out, "*.parquet"))
	if len(parts) >= 12 {
		t.Fatalf("every split was published before the workers were frozen (%d files); nothing to kill mid-way", len(parts))
	}
	victim := parentPid(t, frozen[0])
	t.Logf("%d of 12 splits published; killing executor %d (worker %d)", len(parts), victim, frozen[0])
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, pid := range frozen {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := <-done; err != nil {
		t.Fatalf("the job did not recover from the lost executor: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "restarting every rank") {
		t.Errorf("the job did not restart its gang:\n%s", stderr.String())
	}
	if files, _ := filepath.Glob(filepath.Join(out, "*.parquet")); len(files) != 12 {
		t.Errorf("%d output files, want one per split (12)", len(files))
	}
	if hidden, _ := filepath.Glob(filepath.Join(out, ".*")); len(hidden) > 0 {
		t.Errorf("temporary files left in the output: %v", hidden)
	}
	t.Log(runPython(t, py, predictCheck, data, out, model))
	if left := workers(); len(left) > 0 {
		t.Errorf("workers left running: %v", left)
	}
}

// cmdlinePids lists the processes whose command line starts with args.
func cmdlinePids(args ...string) []int {
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

// parentPid is pid's parent.
func parentPid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces, so start after it.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// TestPredictOnHDFS reads the model and the data from the test HDFS and
// writes the scores there, through the executors' checkpoint service.
func TestPredictOnHDFS(t *testing.T) {
	t.Parallel()
	py := predictPython(t)
	data, model := predictSetup(t, py, 20000, 2, 3000)
	cluster := hdfstest.NewTestCluster(t, hdfstest.Config{Dir: t.TempDir(), DataNodes: 2, BlockSize: 256 << 10, Replication: 1})
	confDir := t.TempDir()
	if err := cluster.WriteConfig(confDir); err != nil {
		t.Fatal(err)
	}
	env := []string{"HADOOP_CONF_DIR=" + confDir, "HADOOP_USER_NAME=" + cluster.Superuser()}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: confDir, User: cluster.Superuser()})
	defer res.Close()
	files, _ := filepath.Glob(filepath.Join(data, "*.parquet"))
	for _, f := range files {
		upload(t, res, f, "hdfs:///data/"+filepath.Base(f))
	}
	upload(t, res, model, "hdfs:///models/logreg/model.onnx")

	r := spindleEnv(t, t.TempDir(), env, predictArgs(py, "hdfs:///models/logreg", "hdfs:///data/", "hdfs:///scores/", "--columns", "f0,f1,f2")...)
	if r.code != 0 {
		t.Fatalf("spindle predict on HDFS failed:\n%s", r)
	}
	local := t.TempDir()
	names := download(t, res, "hdfs:///scores", local)
	if !slices.Contains(names, "_SUCCESS") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, ".") }) {
		t.Errorf("hdfs:///scores holds %v: want the parts and _SUCCESS, nothing hidden", names)
	}
	t.Log(runPython(t, py, predictCheck, data, local, model))
}

// TestPredictFlightInput scores a flight whose endpoints' sizes are
// unknown: each rank takes an endpoint whole and writes it as one file.
func TestPredictFlightInput(t *testing.T) {
	t.Parallel()
	py := predictPython(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	batch := func(first, n int) []arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for id := first; id < first+n; id++ {
			b.Field(0).(*array.Int64Builder).Append(int64(id))
			b.Field(1).(*array.Float64Builder).Append(float64(id) / 1000)
		}
		return []arrow.RecordBatch{b.NewRecordBatch()}
	}
	srv := flighttest.Start(t, "etl-token", map[string]flighttest.Flight{
		"users/today": {Schema: schema, Endpoints: [][]arrow.RecordBatch{batch(0, 2500), batch(2500, 1500)}, Unsized: true},
	})
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	if err := (predicttest.LogReg{Input: "features", Output: "score", W: []float32{1.5}, B: -2}).Write(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "scores")
	args := []string{"predict", "--master", "local[2]", "--model", model, "--input", srv.URI("users/today"), "--output", out,
		"--columns", "x", "--keep", "id", "--python", py, "--conf", "spindle.flight.token=etl-token"}
	r := spindle(t, dir, append(args, fastConf()...)...)
	if r.code != 0 {
		t.Fatalf("spindle predict of a flight failed:\n%s", r)
	}
	if files, _ := filepath.Glob(filepath.Join(out, "*.parquet")); len(files) != 2 {
		t.Errorf("%d files, want one per endpoint: %v", len(files), files)
	}
	t.Log(runPython(t, py, `
import sys, numpy as np, pyarrow.dataset as ds
t = ds.dataset(sys.argv[1], format="parquet").to_table()
ids, s = t.column("id").to_numpy(), t.column("score").to_numpy()
assert sorted(ids.tolist()) == list(range(4000)), "rows missing or repeated"
want = 1 / (1 + np.exp(-(1.5 * (ids / 1000).astype(np.float32) - 2)))
assert np.abs(s - want).max() < 1e-5, np.abs(s - want).max()
print("rows", len(ids))
`, out))
}

// TestPredictStandalone runs spindle predict on the standalone cluster
// manager (one master, one worker, as processes): the model and the
// workers' spec reach the executors as shipped files, as on any cluster.
func TestPredictStandalone(t *testing.T) {
	t.Parallel()
	py := predictPython(t)
	data, model := predictSetup(t, py, 20000, 2, 3000)
	dir := t.TempDir()
	const secret = "predict-cluster-secret-0123456789abcdef"
	master, raft := testaddr.Free(t), testaddr.Free(t)
	env := append(testEnv(), "SPINDLE_CLUSTER_SECRET="+secret)
	for _, args := range [][]string{
		{"master", "--id", "m1", "--addr", master, "--raft-addr", raft, "--peers", "m1=" + raft + "@" + master, "--data-dir", filepath.Join(dir, "m1")},
		{"worker", "--masters", master, "--id", "w1", "--addr", testaddr.Free(t), "--cores", "4", "--memory", "4g",
			"--work-dir", filepath.Join(dir, "w1"), "--conf", "spindle.worker.heartbeatInterval=200ms"},
	} {
		logf, err := os.Create(filepath.Join(dir, args[0]+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(spindleBin, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
	}
	out := filepath.Join(dir, "scores")
	args := []string{"predict", "--master", "spindle://" + master, "--num-executors", "2", "--model", model, "--input", data,
		"--output", out, "--columns", "f0,f1,f2", "--keep", "id,name,label", "--python", py}
	// The worker registers soon after the master elects itself; until
	// then the job cannot be placed and submit says so.
	budget := testutil.NewBudget(time.Minute)
	for {
		r := spindleEnv(t, dir, []string{"SPINDLE_CLUSTER_SECRET=" + secret}, append(args, fastConf()...)...)
		if r.code == 0 {
			break
		}
		if budget.Spent() {
			logs, _ := os.ReadFile(filepath.Join(dir, "worker.log"))
			t.Fatalf("spindle predict on the standalone cluster failed:\n%s\nworker log:\n%s", r, logs)
		}
		os.RemoveAll(out)
		time.Sleep(500 * time.Millisecond) // waiting for the cluster to come up, not synchronising
	}
	t.Log(runPython(t, py, predictCheck, data, out, model))
}

// download copies the files of the directory at uri into local and
// returns the names of its entries.
func download(t *testing.T, res *fsys.Resolver, uri, local string) []string {
	t.Helper()
	ctx := context.Background()
	fsy, dir, err := res.Resolve(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := fsy.ReadDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if e.IsDir() {
			continue
		}
		f, err := fsy.Open(ctx, dir+"/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, f.Size())
		n, err := f.ReadAt(b, 0)
		f.Close()
		if n != len(b) {
			t.Fatalf("read %s: %d of %d bytes: %v", e.Name(), n, len(b), err)
		}
		if err := os.WriteFile(filepath.Join(local, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// TestPredictOnYARN runs spindle predict on YARN (spindle minicluster:
// the protocol-level HDFS and YARN), in client and cluster deploy modes,
// reading the data from HDFS and writing the scores there.
func TestPredictOnYARN(t *testing.T) {
	t.Parallel()
	py := predictPython(t)
	data, model := predictSetup(t, py, 12000, 2, 2000)
	dir := t.TempDir()
	usage := startMinicluster(t, dir, data)
	m := regexp.MustCompile(`export HADOOP_USER_NAME=(\S+)`).FindStringSubmatch(usage)
	if m == nil {
		t.Fatalf("the minicluster's usage names no user:\n%s", usage)
	}
	confDir := filepath.Join(dir, "hadoop-conf")
	env := []string{"HADOOP_CONF_DIR=" + confDir, "HADOOP_USER_NAME=" + m[1]}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: confDir, User: m[1]})
	defer res.Close()
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			out := "hdfs:///user/alice/scores-" + mode
			args := predictArgs(py, model, "hdfs:///user/alice/data/", out, "--columns", "f0,f1,f2",
				"--deploy-mode", mode, "--executor-memory", "256m", "--conf", "spindle.network.interface=lo")
			args[2] = "yarn" // --master
			r := spindleEnv(t, t.TempDir(), env, args...)
			if r.code != 0 {
				t.Fatalf("spindle predict on YARN (%s mode) failed:\n%s", mode, r)
			}
			local := t.TempDir()
			if names := download(t, res, out, local); !slices.Contains(names, "_SUCCESS") {
				t.Errorf("%s holds %v: no _SUCCESS", out, names)
			}
			t.Log(runPython(t, py, predictCheck, data, local, model))
		})
	}
	// An output the user cannot write is bad input, found before the job.
	denied := "hdfs:///user/alice/scores"
	r := spindleEnv(t, t.TempDir(), []string{"HADOOP_CONF_DIR=" + confDir, "HADOOP_USER_NAME=alice"},
		predictArgs(py, model, "hdfs:///user/alice/data/", denied, "--columns", "f0,f1,f2")...)
	if r.code != 2 || !strings.Contains(r.stderr, "--output "+denied) || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("an output alice cannot write: want exit 2 naming it:\n%s", r)
	}
}
