package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// These tests run the real feed server and read it from Python with the
// spindle package (python/spindle), checking that Python sees exactly the
// values, nulls and epoch boundaries the server sent.

// pyInterpreter is the Python the training processes of the examples use.
const pyInterpreter = "/usr/bin/python3"

// pyReadFeed reads every epoch of the feed named by SPINDLE_FEED with
// spindle.batches() (argv[1] "batches") or spindle.tensors() ("tensors")
// and prints what it saw as JSON: nulls and NaNs as null, binary as hex.
const pyReadFeed = `
import json, math, sys
import numpy as np
import spindle

def plain(a):
    mask = np.ma.getmaskarray(a)
    data = np.ma.getdata(a)
    out = []
    for i, v in enumerate(data.tolist()):
        if mask[i] or v is None or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif isinstance(v, bytes):
            out.append(v.hex())
        else:
            out.append(v)
    return out

kind = sys.argv[1]
first_only = len(sys.argv) > 2 and sys.argv[2] == "first"
res = {"epochs": [], "end": [], "error": None}
try:
    while True:
        ep = spindle.tensors() if kind == "tensors" else spindle.batches()
        if ep.end_of_feed:
            res["end"] = [ep.epoch, spindle.batches().epoch, spindle.last_epoch()]
            break
        e = {"epoch": ep.epoch, "columns": ep.columns, "label": ep.label_column, "batches": [], "dtypes": {}}
        res["epochs"].append(e)
        for b in ep:
            if kind == "tensors":
                x, y = b
                e["dtypes"] = {"x": str(x.dtype), "y": str(y.dtype)}
                e["batches"].append({"x": [plain(r) for r in x], "y": plain(y)})
            else:
                e["dtypes"] = {k: str(v.dtype) for k, v in b.items()}
                e["batches"].append({k: plain(v) for k, v in b.items()})
            if first_only:
                ep.close()  # abandon the rest of the epoch
                break
except spindle.FeedError as err:
    res["error"] = type(err).__name__ + ": " + str(err)
print(json.dumps(res))
`

// pyCol is one column of a test batch: its field and its values, nil for null.
type pyCol struct {
	field arrow.Field
	vals  []any
}

// pyTestBatch returns the columns of batch b of epoch e with rows rows;
// withName adds a string column (arrow mode only: tensor mode refuses it).
func pyTestBatch(e, b, rows int, withName bool) []pyCol {
	cols := []pyCol{
		{field: arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64}},
		{field: arrow.Field{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true}},
		{field: arrow.Field{Name: "u32", Type: arrow.PrimitiveTypes.Uint32}},
		{field: arrow.Field{Name: "u64", Type: arrow.PrimitiveTypes.Uint64}},
		{field: arrow.Field{Name: "f16", Type: arrow.FixedWidthTypes.Float16, Nullable: true}},
		{field: arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true}},
		{field: arrow.Field{Name: "f64", Type: arrow.PrimitiveTypes.Float64}},
		{field: arrow.Field{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}},
	}
	if withName {
		cols = append(cols, pyCol{field: arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}})
	}
	cols = append(cols, pyCol{field: arrow.Field{Name: "label", Type: arrow.PrimitiveTypes.Int64}})
	for r := 0; r < rows; r++ {
		id := 1000*e + 100*b + r
		null := func(every int) bool { return id%every == 1 }
		vals := []any{
			int64(id),
			int8(id%200 - 100),
			uint32(4_000_000_000 - id),
			uint64(math.MaxUint64 - uint64(id)),
			float16.New(float32(id%50) * 0.25),
			float32(id) / 3,
			float64(id)/7 - 1e6,
			id%3 == 0,
		}
		nullable := []int{0, 3, 0, 0, 4, 5, 0, 2}
		if withName {
			vals = append(vals, fmt.Sprintf("row-%d-ü", id))
			nullable = append(nullable, 6)
		}
		vals = append(vals, int64(id%2))
		nullable = append(nullable, 0)
		for i, v := range vals {
			if nullable[i] > 0 && null(nullable[i]) {
				v = nil
			}
			cols[i].vals = append(cols[i].vals, v)
		}
	}
	return cols
}

func pyRecord(t *testing.T, mem memory.Allocator, schema *arrow.Schema, cols []pyCol) arrow.RecordBatch {
	t.Helper()
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		bld := array.NewBuilder(mem, c.field.Type)
		for _, v := range c.vals {
			if v == nil {
				bld.AppendNull()
				continue
			}
			switch b := bld.(type) {
			case *array.Int64Builder:
				b.Append(v.(int64))
			case *array.Int8Builder:
				b.Append(v.(int8))
			case *array.Uint32Builder:
				b.Append(v.(uint32))
			case *array.Uint64Builder:
				b.Append(v.(uint64))
			case *array.Float16Builder:
				b.Append(v.(float16.Num))
			case *array.Float32Builder:
				b.Append(v.(float32))
			case *array.Float64Builder:
				b.Append(v.(float64))
			case *array.BooleanBuilder:
				b.Append(v.(bool))
			case *array.StringBuilder:
				b.Append(v.(string))
			default:
				t.Fatalf("no builder for %s", c.field.Type)
			}
		}
		arrs[i] = bld.NewArray()
		bld.Release()
		defer arrs[i].Release()
	}
	return array.NewRecordBatch(schema, arrs, int64(len(cols[0].vals)))
}

// pySource is an in-memory epoch source: epoch e holds batches of
// layout[e] rows. With failEpoch >= 0, that epoch fails after its first
// batch.
type pySource struct {
	t         *testing.T
	mem       memory.Allocator
	schema    *arrow.Schema
	withName  bool
	layout    [][]int
	failEpoch int
}

func newPySource(t *testing.T, withName bool, layout [][]int) *pySource {
	var fields []arrow.Field
	for _, c := range pyTestBatch(0, 0, 0, withName) {
		fields = append(fields, c.field)
	}
	return &pySource{t: t, mem: memory.NewGoAllocator(), schema: arrow.NewSchema(fields, nil),
		withName: withName, layout: layout, failEpoch: -1}
}

func (s *pySource) Schema() *arrow.Schema { return s.schema }

func (s *pySource) Epoch(_ context.Context, epoch int) (feed.Reader, error) {
	r := &pyReader{schema: s.schema, failAfter: -1}
	for b, rows := range s.layout[epoch] {
		r.recs = append(r.recs, pyRecord(s.t, s.mem, s.schema, pyTestBatch(epoch, b, rows, s.withName)))
	}
	if epoch == s.failEpoch {
		r.failAfter = 1
	}
	return r, nil
}

var errPySourceBroke = errors.New("python interop test: source broke")

type pyReader struct {
	schema    *arrow.Schema
	recs      []arrow.RecordBatch
	next      int
	failAfter int
}

func (r *pyReader) Schema() *arrow.Schema { return r.schema }

func (r *pyReader) Next(context.Context) (arrow.RecordBatch, error) {
	if r.failAfter >= 0 && r.next == r.failAfter {
		return nil, errPySourceBroke
	}
	if r.next == len(r.recs) {
		return nil, io.EOF
	}
	rec := r.recs[r.next]
	r.recs[r.next] = nil
	r.next++
	return rec, nil
}

func (r *pyReader) Close() error {
	for _, rec := range r.recs {
		if rec != nil {
			rec.Release()
		}
	}
	r.recs = nil
	return nil
}

// pyResult is what pyReadFeed prints.
type pyResult struct {
	Epochs []struct {
		Epoch   int                          `json:"epoch"`
		Columns []string                     `json:"columns"`
		Label   *string                      `json:"label"`
		Batches []map[string]json.RawMessage `json:"batches"`
		DTypes  map[string]string            `json:"dtypes"`
	} `json:"epochs"`
	End   []int   `json:"end"`
	Error *string `json:"error"`
}

// pyPrerequisites skips the test when the interpreter or numpy is missing
// and returns the directory holding the spindle package.
// pyarrowInterpreter returns a Python that imports pyarrow: Debian's has
// none, so the test venv's (make deps puts pyarrow there, beside Debian's
// packages), else Debian's if pyarrow was installed there by hand.
func pyarrowInterpreter(t *testing.T) string {
	t.Helper()
	venv := os.Getenv("SPINDLE_TEST_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-test-venv")
	}
	for _, py := range []string{filepath.Join(venv, "bin", "python"), pyInterpreter} {
		if exec.Command(py, "-c", "import pyarrow, numpy").Run() == nil {
			return py
		}
	}
	t.Skipf("no Python here imports pyarrow (make deps installs it into %s)", venv)
	return ""
}

func pyPrerequisites(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(pyInterpreter); err != nil {
		t.Skipf("%s not found: %v", pyInterpreter, err)
	}
	if out, err := exec.Command(pyInterpreter, "-c", "import numpy").CombinedOutput(); err != nil {
		t.Skipf("numpy does not import in %s: %v\n%s", pyInterpreter, err, out)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "spindle", "__init__.py")); err != nil {
		t.Fatalf("the spindle Python package is not at %s: %v", dir, err)
	}
	return dir
}

// pyRun serves src in mode over a fresh socket (and, with shm, its
// shared-memory twin), runs pyReadFeed with kind against it, and returns
// what Python saw and what Run returned. With shm it fails the test
// unless the batches went through shared memory.
func pyRun(t *testing.T, py, pkgDir string, mode Mode, src EpochSource, epochs int, kind string, shm bool, env ...string) (pyResult, error) {
	t.Helper()
	res, _, err := pyRunServer(t, py, pkgDir, mode, src, epochs, kind, shm, env...)
	return res, err
}

// pyRunServer is pyRun that also returns the server, stopped.
func pyRunServer(t *testing.T, py, pkgDir string, mode Mode, src EpochSource, epochs int, kind string, shm bool, env ...string) (pyResult, *Server, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "spy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "feed.sock")
	cfg := ServerConfig{SocketPath: sock, Mode: mode, Epochs: epochs, Source: src, LabelColumn: "label", SharedMemory: shm}
	// Arrow batches built in a SharedRegion go out where they lie: Python
	// reads their buffers at the offsets their metadata points to.
	ps, lend := src.(*pySource)
	if lend = lend && shm && mode == ModeArrow; lend {
		cfg.SharedRegion = newTestRegion(t)
		ps.mem = feed.NewBatchAllocator(cfg.SharedRegion, memory.DefaultAllocator)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return srv.Run(ctx) })

	args := []string{"-c", pyReadFeed}
	args = append(args, strings.Fields(kind)...)
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pkgDir, "SPINDLE_FEED="+sock, "SPINDLE_FEED_MODE="+string(mode))
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	cancel()
	srvErr := g.Wait()
	if runErr != nil {
		t.Fatalf("python failed: %v\n%s", runErr, stderr.String())
	}
	var res pyResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("python printed %q: %v\nstderr: %s", stdout.String(), err, stderr.String())
	}
	if shm && srv.shmBytes.Load() == 0 {
		t.Errorf("nothing went through shared memory (%d bytes over the socket)", srv.bytes.Load())
	}
	if lend && srv.Stats().Batches > 0 && srv.shmInPlace.Load() == 0 {
		t.Errorf("no batch of the %d sent went where it lay in the shared region", srv.Stats().Batches)
	}
	return res, srv, srvErr
}

// pySawLayout fails the test unless the server ran without error (err)
// and Python read pyLayout's epochs, without error.
func pySawLayout(t *testing.T, res pyResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	if res.Error != nil {
		t.Fatalf("python: %s", *res.Error)
	}
	if len(res.Epochs) != len(pyLayout) {
		t.Fatalf("python saw %d epochs, want %d", len(res.Epochs), len(pyLayout))
	}
}

// pyLayout is the batches of each epoch: different counts and sizes, so
// that a reader mixing up epochs fails.
var pyLayout = [][]int{{4, 4, 2}, {5, 1}}

// pySame reports whether Python's JSON value got equals the Go value want.
func pySame(want any, got json.RawMessage) (bool, string) {
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return false, err.Error()
	}
	if want == nil || v == nil {
		return want == nil && v == nil, fmt.Sprint(v)
	}
	num, _ := v.(json.Number)
	switch w := want.(type) {
	case int64:
		return string(num) == strconv.FormatInt(w, 10), string(num)
	case int8:
		return string(num) == strconv.Itoa(int(w)), string(num)
	case uint32:
		return string(num) == strconv.FormatUint(uint64(w), 10), string(num)
	case uint64:
		return string(num) == strconv.FormatUint(w, 10), string(num)
	case float16.Num:
		f, err := num.Float64()
		return err == nil && f == float64(w.Float32()), string(num)
	case float32:
		f, err := num.Float64()
		return err == nil && f == float64(w), string(num)
	case float64:
		f, err := num.Float64()
		return err == nil && f == w, string(num)
	case bool, string:
		return v == want, fmt.Sprint(v)
	}
	return false, fmt.Sprintf("no comparison for %T", want)
}

// pyFloat32 is the tensor feed's conversion of a value: float32, nulls as NaN (nil).
func pyFloat32(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int64:
		return float32(x)
	case int8:
		return float32(x)
	case uint32:
		return float32(x)
	case uint64:
		return float32(x)
	case float16.Num:
		return x.Float32()
	case float32:
		return x
	case float64:
		return float32(x)
	case bool:
		if x {
			return float32(1)
		}
		return float32(0)
	}
	panic(fmt.Sprintf("pyFloat32 of %T", v))
}

func TestPythonReadsArrowFeed(t *testing.T) { overBoth(t, testPythonReadsArrowFeed) }

func testPythonReadsArrowFeed(t *testing.T, shm bool) {
	pkgDir := pyPrerequisites(t)
	for _, pyarrow := range []bool{false, true} {
		t.Run(fmt.Sprintf("pyarrow=%t", pyarrow), func(t *testing.T) {
			py, env := pyInterpreter, "SPINDLE_PYARROW=0"
			if pyarrow {
				py, env = pyarrowInterpreter(t), "SPINDLE_PYARROW=1"
			}
			src := newPySource(t, true, pyLayout)
			res, err := pyRun(t, py, pkgDir, ModeArrow, src, len(pyLayout), "batches", shm, env)
			pySawLayout(t, res, err)
			wantTypes := map[string]string{"id": "int64", "i8": "int8", "u32": "uint32", "u64": "uint64",
				"f16": "float16", "f32": "float32", "f64": "float64", "flag": "bool", "name": "object", "label": "int64"}
			for e, ep := range res.Epochs {
				if ep.Epoch != e {
					t.Errorf("epoch %d: python saw epoch number %d", e, ep.Epoch)
				}
				if len(ep.Batches) != len(pyLayout[e]) {
					t.Fatalf("epoch %d: python saw %d batches, want %d", e, len(ep.Batches), len(pyLayout[e]))
				}
				for k, v := range wantTypes {
					if ep.DTypes[k] != v {
						t.Errorf("epoch %d: column %s has dtype %s in Python, want %s", e, k, ep.DTypes[k], v)
					}
				}
				for b, rows := range pyLayout[e] {
					for _, c := range pyTestBatch(e, b, rows, true) {
						var got []json.RawMessage
						if err := json.Unmarshal(ep.Batches[b][c.field.Name], &got); err != nil || len(got) != rows {
							t.Fatalf("epoch %d batch %d column %s: %d values (%v), want %d", e, b, c.field.Name, len(got), err, rows)
						}
						for r, want := range c.vals {
							if ok, saw := pySame(want, got[r]); !ok {
								t.Errorf("epoch %d batch %d column %s row %d: python saw %s, want %v", e, b, c.field.Name, r, saw, want)
							}
						}
					}
				}
			}
			if fmt.Sprint(res.End) != "[-1 -1 -1]" {
				t.Errorf("after the last epoch python saw epochs %v, want [-1 -1 -1]", res.End)
			}
		})
	}
}

func TestPythonReadsTensorFeed(t *testing.T) { overBoth(t, testPythonReadsTensorFeed) }

func testPythonReadsTensorFeed(t *testing.T, shm bool) {
	pkgDir := pyPrerequisites(t)
	src := newPySource(t, false, pyLayout)
	res, err := pyRun(t, pyInterpreter, pkgDir, ModeTensor, src, len(pyLayout), "tensors", shm)
	pySawLayout(t, res, err)
	for e, ep := range res.Epochs {
		if ep.Epoch != e || ep.Label == nil || *ep.Label != "label" {
			t.Errorf("epoch %d: python saw epoch %d, label %v", e, ep.Epoch, ep.Label)
		}
		if fmt.Sprint(ep.Columns) != "[id i8 u32 u64 f16 f32 f64 flag label]" {
			t.Errorf("epoch %d: columns %v", e, ep.Columns)
		}
		if ep.DTypes["x"] != "float32" || ep.DTypes["y"] != "float32" {
			t.Errorf("epoch %d: dtypes %v, want float32", e, ep.DTypes)
		}
		if len(ep.Batches) != len(pyLayout[e]) {
			t.Fatalf("epoch %d: python saw %d batches, want %d", e, len(ep.Batches), len(pyLayout[e]))
		}
		for b, rows := range pyLayout[e] {
			cols := pyTestBatch(e, b, rows, false)
			var x [][]json.RawMessage
			var y []json.RawMessage
			if err := json.Unmarshal(ep.Batches[b]["x"], &x); err != nil || len(x) != rows {
				t.Fatalf("epoch %d batch %d: %d rows (%v), want %d", e, b, len(x), err, rows)
			}
			if err := json.Unmarshal(ep.Batches[b]["y"], &y); err != nil || len(y) != rows {
				t.Fatalf("epoch %d batch %d: %d labels (%v), want %d", e, b, len(y), err, rows)
			}
			features := cols[:len(cols)-1]
			for r := 0; r < rows; r++ {
				if len(x[r]) != len(features) {
					t.Fatalf("epoch %d batch %d row %d: %d features, want %d", e, b, r, len(x[r]), len(features))
				}
				for j, c := range features {
					if ok, saw := pySame(pyFloat32(c.vals[r]), x[r][j]); !ok {
						t.Errorf("epoch %d batch %d row %d feature %s: python saw %s, want %v", e, b, r, c.field.Name, saw, c.vals[r])
					}
				}
				if ok, saw := pySame(pyFloat32(cols[len(cols)-1].vals[r]), y[r]); !ok {
					t.Errorf("epoch %d batch %d row %d label: python saw %s", e, b, r, saw)
				}
			}
		}
	}
	if fmt.Sprint(res.End) != "[-1 -1 -1]" {
		t.Errorf("after the last epoch python saw epochs %v, want [-1 -1 -1]", res.End)
	}
}

// TestPythonClosesEarly has Python take one batch of each epoch and close
// it: the executor stops sending it and serves the next.
func TestPythonClosesEarly(t *testing.T) { overBoth(t, testPythonClosesEarly) }

func testPythonClosesEarly(t *testing.T, shm bool) {
	pkgDir := pyPrerequisites(t)
	// More than a socket's buffer holds: the executor is still sending
	// when Python closes.
	layout := [][]int{make([]int, 100), make([]int, 100)}
	for e := range layout {
		for b := range layout[e] {
			layout[e][b] = 500
		}
	}
	for _, mode := range []Mode{ModeArrow, ModeTensor} {
		t.Run(string(mode), func(t *testing.T) {
			kind := "batches first"
			if mode == ModeTensor {
				kind = "tensors first"
			}
			res, err := pyRun(t, pyInterpreter, pkgDir, mode, newPySource(t, false, layout), 2, kind, shm, "SPINDLE_PYARROW=0")
			if err != nil {
				t.Fatalf("server: %v", err)
			}
			if res.Error != nil {
				t.Fatalf("python: %s", *res.Error)
			}
			if len(res.Epochs) != 2 || res.Epochs[1].Epoch != 1 || len(res.Epochs[0].Batches) != 1 || len(res.Epochs[1].Batches) != 1 {
				t.Fatalf("python saw %+v; want one batch of each of epochs 0 and 1", res.Epochs)
			}
			if fmt.Sprint(res.End) != "[-1 -1 -1]" {
				t.Errorf("after the last epoch python saw epochs %v, want [-1 -1 -1]", res.End)
			}
		})
	}
}

func TestPythonSeesCutStream(t *testing.T) { overBoth(t, testPythonSeesCutStream) }

func testPythonSeesCutStream(t *testing.T, shm bool) {
	pkgDir := pyPrerequisites(t)
	for _, mode := range []Mode{ModeArrow, ModeTensor} {
		t.Run(string(mode), func(t *testing.T) {
			src := newPySource(t, false, pyLayout)
			src.failEpoch = 1
			kind := "batches"
			if mode == ModeTensor {
				kind = "tensors"
			}
			res, err := pyRun(t, pyInterpreter, pkgDir, mode, src, len(pyLayout), kind, shm, "SPINDLE_PYARROW=0")
			if !errors.Is(err, errPySourceBroke) {
				t.Errorf("server returned %v, want the source's error", err)
			}
			if res.Error == nil {
				t.Fatalf("python read a cut epoch without error: %+v", res)
			}
			const want = "FeedTruncatedError: "
			if len(*res.Error) < len(want) || (*res.Error)[:len(want)] != want {
				t.Errorf("python raised %q, want a FeedTruncatedError", *res.Error)
			}
			if len(res.Epochs) != 2 || len(res.Epochs[0].Batches) != 3 || res.Epochs[1].Epoch != 1 || len(res.Epochs[1].Batches) != 1 {
				t.Errorf("python saw %+v before the cut; want epoch 0 whole and one batch of epoch 1", res.Epochs)
			}
		})
	}
}
