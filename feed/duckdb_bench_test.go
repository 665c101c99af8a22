package feed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

var (
	duckRows  = flag.Int("duckdb.rows", 4_000_000, "rows in each DuckDB-written file of BenchmarkVsDuckDB (16 float32 columns and an int64 label)")
	duckKinds = flag.String("duckdb.files", "snappy,zstd,gzip,uncompressed,nullable,dictstring,smallgroups,hugegroup",
		"the files BenchmarkVsDuckDB writes and reads (see feed/testdata/duckdb-bench.mjs)")
	duckReps = flag.Int("duckdb.reps", 5, "timed scans per file and thread count, for each side, alternating (the medians count)")
	duckDir  = flag.String("duckdb.dir", "", "directory for the DuckDB-written files, kept and reused by later runs with the same -duckdb.rows (empty: a temporary one)")
)

// duckFile is a test file DuckDB wrote.
type duckFile struct {
	Kind      string `json:"kind"`
	Path      string `json:"path"`
	Rows      int64  `json:"rows"`
	RowGroups int    `json:"rowGroups"`
	Bytes     int64  `json:"bytes"`
}

// duckNode runs the DuckDB side's script with node and returns its
// standard output.
func duckNode(b *testing.B, prefix string, args ...string) []byte {
	b.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "duckdb-bench.mjs"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("node", append([]string{script, prefix}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("node duckdb-bench.mjs %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// duckPrefix returns the npm prefix holding @duckdb/node-api, or skips
// the benchmark saying what is missing.
func duckPrefix(b *testing.B) string {
	skip := func(format string, args ...any) {
		// Printed as well: a skipped benchmark's reason shows only with -v.
		msg := fmt.Sprintf("skipping: "+format, args...)
		fmt.Println("BenchmarkVsDuckDB:", msg)
		b.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		skip("no node on PATH (DuckDB's side runs on @duckdb/node-api)")
	}
	prefix := os.Getenv("SPINDLE_BENCH_NODE")
	if prefix == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			skip("no home directory for the node package cache: %v", err)
		}
		prefix = filepath.Join(home, ".cache", "spindle-bench-node")
	}
	if _, err := os.Stat(filepath.Join(prefix, "node_modules", "@duckdb", "node-api", "package.json")); err != nil {
		skip("@duckdb/node-api is not installed under %s (npm install --prefix %s @duckdb/node-api, as scripts/bench.sh does)", prefix, prefix)
	}
	return prefix
}

// BenchmarkVsDuckDB compares the feed pipeline with DuckDB on files
// DuckDB writes: 4M rows of 16 float32 columns and an int64 label by
// default, snappy, zstd, gzip and uncompressed, and snappy files with
// 10% nulls, a dictionary-encoded string column, row groups of 8192 rows,
// and one row group for the whole file. For each file and for 1 and 2
// threads it times, in the same run and alternately pass by pass, DuckDB
// summing every column (SET threads=N) and the pipeline planning the file
// and decoding it to Arrow batches for one rank (N decode workers,
// GOMAXPROCS=N), -duckdb.reps passes each after an untimed one; the
// medians count, and the page cache is warm for both. It reports rows/s
// and the Spindle/DuckDB ratio per file and thread count, Spindle's
// 2-thread/1-thread speedup, and each side's process CPU time per
// million rows, which other work on a shared machine moves much less than
// the rates. Each of those passes builds a new pipeline, as a job does
// for its first epoch; Spindle's speedup over later epochs of one
// pipeline (parsed footers, a filled buffer pool) is reported beside it,
// and, first, what a second thread gives work in main memory on this
// machine (machineScaling), the ceiling for the huge row group.
func BenchmarkVsDuckDB(b *testing.B) {
	prefix := duckPrefix(b)
	files := duckFiles(b, prefix)

	// arrow-go shares one zstd decoder, with as many decoding slots as
	// GOMAXPROCS when it is first used; make it now, before spindleScan
	// lowers GOMAXPROCS, or 2-thread decodes would share one slot.
	zstdCodec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		b.Fatal(err)
	}
	if got := zstdCodec.Decode(nil, zstdCodec.Encode(nil, []byte("warm up"))); string(got) != "warm up" {
		b.Fatalf("warming up the zstd decoder gave %q", got)
	}

	var machine machineScaling
	b.Run("machine", func(b *testing.B) {
		if machine == (machineScaling{}) { // once, whatever b.N
			machine = measureMachineScaling(b)
		}
		b.ReportMetric(machine.copy, "copy-2t/1t")
		b.ReportMetric(machine.snappy, "snappy-16MB-pages-2t/1t")
	})

	results := map[string][]*duckResult{} // by file kind: 1 thread, 2 threads
	for _, f := range files {
		b.Run(f.Kind, func(b *testing.B) {
			rs := results[f.Kind]
			if rs == nil { // once, whatever b.N: each side's passes are -duckdb.reps
				rs = duckCompare(b, prefix, f, *duckReps)
				results[f.Kind] = rs
			}
			for i, r := range rs {
				t := fmt.Sprintf("-%dt", i+1)
				b.ReportMetric(r.duck, "duckdb"+t+"-rows/s")
				b.ReportMetric(r.spindle, "spindle"+t+"-rows/s")
				b.ReportMetric(r.spindle/r.duck, "spindle/duckdb"+t)
				b.ReportMetric(r.duckCPU, "duckdb"+t+"-cpu-s/Mrow")
				b.ReportMetric(r.spindleCPU, "spindle"+t+"-cpu-s/Mrow")
				b.ReportMetric(r.spindleCores, "spindle"+t+"-cores")
			}
			b.ReportMetric(rs[1].speedup, "spindle-2t/1t")
			b.ReportMetric(rs[1].laterSpeedup, "spindle-later-epochs-2t/1t")
			b.ReportMetric(rs[1].twoProcesses, "spindle-two-1t-processes/1t")
			b.ReportMetric(rs[1].spindleBest/rs[0].spindleBest, "spindle-best-2t/1t")
		})
	}

	var tab strings.Builder
	fmt.Fprintf(&tab, "\n%-13s %7s %4s | %10s %10s %5s | %10s %10s %5s | %6s %6s | %11s | %8s %7s | %9s | %s\n", "file", "MB", "RGs",
		"duckdb 1t", "spindle 1t", "ratio", "duckdb 2t", "spindle 2t", "ratio", "sp 2/1", "dk 2/1", "best sp, dk", "later sp", "2 procs", "sp cores",
		"CPU ms/Mrow 1t duckdb, spindle (duckdb/spindle); 2t")
	for _, f := range files {
		rs := results[f.Kind]
		if rs == nil {
			continue
		}
		r1, r2 := rs[0], rs[1]
		fmt.Fprintf(&tab, "%-13s %7.1f %4d | %9.1fM %9.1fM %5.2f | %9.1fM %9.1fM %5.2f | %6.2f %6.2f | %5.2f %5.2f | %8.2f %7.2f | %4.2f %4.2f | %4.0f %4.0f (%.2f); %4.0f %4.0f (%.2f)\n",
			f.Kind, float64(f.Bytes)/1e6, f.RowGroups, r1.duck/1e6, r1.spindle/1e6, r1.spindle/r1.duck,
			r2.duck/1e6, r2.spindle/1e6, r2.spindle/r2.duck, r2.speedup, r2.duck/r1.duck,
			r2.spindleBest/r1.spindleBest, r2.duckBest/r1.duckBest, r2.laterSpeedup, r2.twoProcesses, r1.spindleCores, r2.spindleCores,
			r1.duckCPU*1e3, r1.spindleCPU*1e3, r1.duckCPU/r1.spindleCPU, r2.duckCPU*1e3, r2.spindleCPU*1e3, r2.duckCPU/r2.spindleCPU)
	}
	// Printed rather than logged: a parent benchmark's log is shown only
	// with -v.
	fmt.Printf("Spindle vs DuckDB: rows/s and CPU per row, medians of %d alternating passes each, same run, %d rows per file "+
		"(2/1: 2 threads over 1; best: the fastest passes'; later sp: Spindle's 2/1 over later epochs of one pipeline; "+
		"2 procs: two 1-thread Spindle processes at once over one alone, later epochs: the same work sharing nothing but the machine; "+
		"sp cores: CPU time over wall time of Spindle's passes, 1t and 2t):%s", *duckReps, *duckRows, tab.String())
	fmt.Printf("The machine, for work in main memory rather than a core's cache (%d buffers of %d MB, medians of %d alternating rounds): "+
		"2 threads over 1 copying them %.2f, snappy-decoding them as pages %.2f\n",
		machineColumns, machineColumnLen>>20, machineRounds, machine.copy, machine.snappy)
}

// duckFiles has DuckDB write the -duckdb.files files of -duckdb.rows rows
// and returns them. With -duckdb.dir, files written there by an earlier
// run with as many rows are reused.
func duckFiles(b *testing.B, prefix string) []duckFile {
	dir := *duckDir
	if dir == "" {
		dir = b.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	kinds := strings.Split(*duckKinds, ",")
	have := map[string]duckFile{}
	var missing []string
	for _, k := range kinds {
		// The sidecar is written after the file: its presence means the file is whole.
		js, err := os.ReadFile(filepath.Join(dir, k+".json"))
		var f duckFile
		if err == nil && json.Unmarshal(js, &f) == nil && f.Rows == int64(*duckRows) {
			if st, err := os.Stat(f.Path); err == nil && st.Size() == f.Bytes {
				have[k] = f
				continue
			}
		}
		missing = append(missing, k)
	}
	if len(missing) > 0 {
		start := time.Now()
		out := duckNode(b, prefix, append([]string{"write", dir, strconv.Itoa(*duckRows)}, missing...)...)
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var f duckFile
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				b.Fatalf("read what duckdb-bench.mjs wrote: %v: %s", err, sc.Bytes())
			}
			if err := os.WriteFile(filepath.Join(dir, f.Kind+".json"), sc.Bytes(), 0o644); err != nil {
				b.Fatal(err)
			}
			have[f.Kind] = f
		}
		b.Logf("DuckDB wrote %d files of %d rows in %v", len(missing), *duckRows, time.Since(start).Round(time.Millisecond))
	}
	files := make([]duckFile, 0, len(kinds))
	for _, k := range kinds {
		f, ok := have[k]
		if !ok {
			b.Fatalf("duckdb-bench.mjs did not write the %s file", k)
		}
		files = append(files, f)
	}
	return files
}

// duckResult is one file and thread count: the medians of each side's
// rows/s and process CPU seconds per million rows, of the cores
// Spindle's passes kept busy (CPU time over wall time), and of its rate
// over its 1-thread rate of the same round; each side's fastest
// pass, which on a shared machine is the one the others' load slowed
// least; and, on the 2-thread result, Spindle's speedup over later epochs
// of one pipeline (spindleLaterEpochs) and what two 1-thread processes
// reach together over one alone (spindleTwoProcesses).
type duckResult struct {
	duck, spindle, duckCPU, spindleCPU, speedup, duckBest, spindleBest float64
	spindleCores, laterSpeedup, twoProcesses                           float64
}

// duckCompare times reps rounds over f, each a pass of DuckDB and one of
// Spindle with 1 thread, then the same with 2 threads, so that both sides
// and both thread counts see the same load; each side and thread count
// has an untimed pass first. It returns the 1-thread and 2-thread results.
func duckCompare(b *testing.B, prefix string, f duckFile, reps int) []*duckResult {
	type passes struct{ duck, duckCPU, sp, spCPU, spCores, speedup []float64 }
	ps := make([]passes, 2)
	spindleScan(b, f, 1) // warm-up; DuckDB's script warms up itself
	spindleScan(b, f, 2)
	for range reps {
		var sp1 float64
		for i := range ps {
			p := &ps[i]
			rate, cpu := duckScan(b, prefix, f, i+1)
			p.duck, p.duckCPU = append(p.duck, rate), append(p.duckCPU, cpu)
			rate, cpu = spindleScan(b, f, i+1)
			p.sp, p.spCPU, p.spCores = append(p.sp, rate), append(p.spCPU, cpu), append(p.spCores, rate/1e6*cpu)
			if i == 0 {
				sp1 = rate
			}
			p.speedup = append(p.speedup, rate/sp1)
		}
	}
	out := make([]*duckResult, len(ps))
	for i, p := range ps {
		out[i] = &duckResult{duck: median(p.duck), spindle: median(p.sp), duckCPU: median(p.duckCPU),
			spindleCPU: median(p.spCPU), spindleCores: median(p.spCores), speedup: median(p.speedup), duckBest: slices.Max(p.duck),
			spindleBest: slices.Max(p.sp)}
	}
	out[1].laterSpeedup = spindleLaterEpochs(b, f, reps)
	out[1].twoProcesses = spindleTwoProcesses(b, f, reps)
	return out
}

// spindleLaterEpochs returns the median, over reps rounds, of Spindle's
// 2-thread rate over its 1-thread rate in epochs after the first of one
// pipeline per thread count (no epoch cache: every epoch decodes the
// file), alternating the thread counts epoch by epoch after an untimed
// epoch each. Those epochs find the file's footer parsed and the buffer
// pool filled, as every epoch after a job's first does.
func spindleLaterEpochs(b *testing.B, f duckFile, reps int) float64 {
	var pipes [2]*Pipeline
	for i := range pipes {
		pipes[i] = plannedPipeline(b, newResolver(), f.Path, decodeBenchConfig(i+1))
		defer pipes[i].Close()
	}
	epoch := func(i, n int) float64 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(i + 1))
		t0 := time.Now()
		rows := epochRows(b, pipes[i], n)
		if rows != f.Rows {
			b.Fatalf("the pipeline fed %d rows of %s, want %d", rows, f.Path, f.Rows)
		}
		return float64(rows) / time.Since(t0).Seconds()
	}
	epoch(0, 0)
	epoch(1, 0)
	speedups := make([]float64, 0, reps)
	for n := 1; n <= reps; n++ {
		one := epoch(0, n)
		speedups = append(speedups, epoch(1, n)/one)
	}
	return median(speedups)
}

// median returns the median of v (the mean of the middle two when even).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// duckScan returns DuckDB's rows/s scanning f with threads threads in
// one timed pass (after an untimed one), and its CPU seconds per million
// rows.
func duckScan(b *testing.B, prefix string, f duckFile, threads int) (rate, cpu float64) {
	out := duckNode(b, prefix, "scan", f.Path, strconv.Itoa(threads), "1")
	var r struct {
		Rows       int64     `json:"rows"`
		Seconds    []float64 `json:"seconds"`
		CPUSeconds []float64 `json:"cpuSeconds"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("read DuckDB's scan of %s: %v: %s", f.Path, err, out)
	}
	if r.Rows != f.Rows || len(r.Seconds) == 0 || len(r.CPUSeconds) == 0 {
		b.Fatalf("DuckDB scanned %d rows of %s in %d passes, want %d rows", r.Rows, f.Path, len(r.Seconds), f.Rows)
	}
	return float64(r.Rows) / slices.Min(r.Seconds), slices.Min(r.CPUSeconds) / (float64(r.Rows) / 1e6)
}

// spindleScan returns the feed pipeline's rows/s over one epoch of f,
// planning the file for one rank and decoding it with threads decode
// workers on GOMAXPROCS=threads, and the process CPU seconds per million
// rows it took.
func spindleScan(b *testing.B, f duckFile, threads int) (rate, cpu float64) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
	c0 := processCPU(b)
	t0 := time.Now()
	rows := spindleEpoch(context.Background(), b, f.Path, threads)
	dt, dc := time.Since(t0), processCPU(b)-c0
	if rows != f.Rows {
		b.Fatalf("the pipeline fed %d rows of %s, want %d", rows, f.Path, f.Rows)
	}
	return float64(f.Rows) / dt.Seconds(), dc.Seconds() / (float64(f.Rows) / 1e6)
}

// processCPU returns the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spindleEpoch plans path for one rank and reads one epoch of it through
// the pipeline, returning the rows fed.
func spindleEpoch(ctx context.Context, b *testing.B, path string, workers int) int64 {
	p := plannedPipeline(b, newResolver(), path, decodeBenchConfig(workers))
	defer p.Close()
	return epochRows(b, p, 0)
}
