package predict

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/model/predict/predicttest"
)

// benchData writes ROWS rows (an id and 16 float32 features) in 8 Parquet
// files of 128Ki-row row groups.
const benchData = `
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
out, rows = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(3)
files = 8
per = rows // files
for i in range(files):
    cols = {"id": np.arange(i * per, (i + 1) * per, dtype=np.int64)}
    for j in range(16):
        cols[f"f{j}"] = rng.normal(size=per).astype(np.float32)
    pq.write_table(pa.table(cols), f"{out}/part-{i}.parquet", row_group_size=131072)
`

// benchBaseline is the baseline: ONNX Runtime scoring Parquet files in
// one Python process with pyarrow (one thread), writing the id and the
// score as Parquet, as spindle predict's workers do.
const benchBaseline = `
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
opts = ort.SessionOptions(); opts.intra_op_num_threads = 1; opts.inter_op_num_threads = 1
sess = ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
feats = [f"f{j}" for j in range(16)]
for k, path in enumerate(sys.argv[3:]):
    w = None
    for b in pq.ParquetFile(path).iter_batches(batch_size=65536):
        x = np.column_stack([b.column(c).to_numpy() for c in feats])
        s = sess.run(None, {"features": x})[0][:, 0]
        t = pa.table({"id": b.column("id"), "score": s})
        w = w or pq.ParquetWriter(f"{out}/base-{k}-{abs(hash(path))}.parquet", t.schema)
        w.write_table(t)
    w.close()
`

// BenchmarkPredictVsONNXRuntime measures spindle predict (local, 2
// executors of one core) against ONNX Runtime scoring the same Parquet
// files in one Python process per core with pyarrow, in the same run;
// SPINDLE_BENCH_PREDICT_ROWS sets the rows (4Mi). Both include starting
// their interpreters; spindle predict also plans, starts executors and
// publishes every file atomically.
func BenchmarkPredictVsONNXRuntime(b *testing.B) {
	py := benchPython(b)
	rows := 4 << 20
	if v, err := strconv.Atoi(os.Getenv("SPINDLE_BENCH_PREDICT_ROWS")); err == nil && v > 0 {
		rows = v
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "spindle")
	build := exec.Command("go", "build", "-o", bin, "./cmd/spindle")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build spindle: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o755)
	benchRun(b, exec.Command(py, "-c", benchData, data, strconv.Itoa(rows)))
	w := make([]float32, 16)
	for i := range w {
		w[i] = float32(i%5) / 4
	}
	model := filepath.Join(dir, "m.onnx")
	if err := (predicttest.LogReg{Input: "features", Output: "score", W: w, B: 0.1}).Write(model); err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(data, "*.parquet"))
	procs := runtime.NumCPU()

	var spindleTime, baseTime time.Duration
	for i := range b.N {
		out := filepath.Join(dir, fmt.Sprintf("out-%d", i))
		start := time.Now()
		benchRun(b, exec.Command(bin, "predict", "--master", "local[2]", "--num-executors", "2", "--executor-cores", "1",
			"--model", model, "--input", data, "--output", out, "--keep", "id", "--python", py, "--conf", "spindle.log.level=warn"))
		spindleTime += time.Since(start)

		base := filepath.Join(dir, fmt.Sprintf("base-%d", i))
		os.Mkdir(base, 0o755)
		start = time.Now()
		var cmds []*exec.Cmd
		for p := range procs {
			var mine []string
			for j := p; j < len(files); j += procs {
				mine = append(mine, files[j])
			}
			if len(mine) == 0 {
				continue
			}
			cmd := exec.Command(py, append([]string{"-c", benchBaseline, model, base}, mine...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				b.Fatalf("baseline: %v\n%s", err, cmd.Stderr)
			}
		}
		baseTime += time.Since(start)
	}
	total := float64(rows) * float64(b.N)
	sp, bs := total/spindleTime.Seconds(), total/baseTime.Seconds()
	b.ReportMetric(sp, "predict-rows/s")
	b.ReportMetric(bs, "onnxruntime-rows/s")
	b.ReportMetric(sp/bs, "ratio")
	b.Logf("%d rows: spindle predict %.0f rows/s (2 executors), ONNX Runtime %.0f rows/s (%d processes): %.2fx", rows, sp, bs, procs, sp/bs)
}

func benchRun(b *testing.B, cmd *exec.Cmd) {
	b.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", cmd.Args[0], err, out)
	}
}

// benchPython is the test venv's Python with pyarrow and onnxruntime
// (scripts/install-deps.sh), or skips.
func benchPython(b *testing.B) string {
	venv := os.Getenv("SPINDLE_TEST_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-test-venv")
	}
	py := filepath.Join(venv, "bin", "python")
	if out, err := exec.Command(py, "-c", "import pyarrow, onnxruntime").CombinedOutput(); err != nil {
		b.Skipf("%s lacks pyarrow or onnxruntime (scripts/install-deps.sh installs them): %v\n%s", py, err, out)
	}
	return py
}
