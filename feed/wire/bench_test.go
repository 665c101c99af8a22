package wire

// The feed benchmark: how close does feeding a training process come to
// the raw bandwidth of the local socket it uses?
//
//	go test -run '^$' -bench Feed -benchtime 5x ./feed/wire
//
// Every sub-benchmark moves the same data to a consumer that is a separate
// process (this test binary, re-executed with consumerEnv set):
//
//	raw     the producer writes the payload's worth of bytes from memory in
//	        4 MiB writes, the consumer reads and discards (hot: the same, but
//	        from one 4 MiB buffer that stays in the CPU cache)
//	decode  the consumer decodes the Parquet file itself, no feed at all
//	arrow   Parquet -> reader -> arrow-mode server -> consumer decodes the IPC stream
//	tensor  Parquet -> reader -> tensor-mode server -> consumer reads float32 matrices
//
// The arrow and tensor paths read the Parquet file through the feed
// pipeline, either decoding it every epoch (parquet: what the first epoch
// of a job costs, and every epoch when the rank's data does not fit the
// cache) or from the pipeline's cache, filled by one epoch before the
// clock started (cached: later epochs of a job whose data fits, and the
// cost of the protocol itself).
//
// Rates are payload rates: rows × row width in float32 bytes per second,
// so that formats with different framing compare fairly. x-raw and x-hot
// divide a path's rate by the raw rates measured right after it with the
// same bytes (the machine's load drifts; a raw figure from a minute earlier
// can be off by half); x-decode divides it by the rate of decoding alone,
// also measured right after it. The consumer also reports its CPU time:
// cpu s/GB is what taking the data costs the training process, and
// x-dec-cpu compares it with decoding the file itself.
// Profile the consumer process with SPINDLE_WIRE_BENCH_CPUPROFILE=file.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/fsys"

	"github.com/spindle-ml/spindle/feed/plan"
)

var (
	benchRows      = flag.Int("feed.rows", 1<<20, "rows in the feed benchmark's Parquet file")
	benchFeatures  = flag.Int("feed.features", 32, "float32 feature columns in the feed benchmark's Parquet file (plus one label)")
	benchBatchRows = flag.String("feed.batch-rows", "1024,16384", "comma-separated batch sizes the feed benchmark tries")
	benchCodec     = flag.String("feed.codec", "snappy", "compression of the feed benchmark's Parquet file (snappy, zstd, uncompressed)")
	benchNoLend    = flag.Bool("feed.no-lend", false, "decode the arrow-shm paths' batches into the executor's heap and copy them into shared memory, as without a SharedRegion")
	benchType      = flag.String("feed.type", "float32", "type of the feature columns of the feed benchmark's Parquet file (float32, float64; GB/s count each path's own bytes, x-decode compares rows)")
)

// Environment of the consumer process.
const (
	consumerEnv       = "SPINDLE_WIRE_BENCH_CONSUMER" // role: raw, decode, arrow, tensor
	consumerSocketEnv = "SPINDLE_WIRE_BENCH_SOCKET"
	consumerFileEnv   = "SPINDLE_WIRE_BENCH_FILE"
	consumerLoopsEnv  = "SPINDLE_WIRE_BENCH_LOOPS"
	consumerBatchEnv  = "SPINDLE_WIRE_BENCH_BATCH_ROWS"
	// consumerProfileEnv, set in the benchmark's environment, makes each
	// consumer write a CPU profile there, suffixed with its role (the
	// last run of a role wins).
	consumerProfileEnv = "SPINDLE_WIRE_BENCH_CPUPROFILE"
)

// rawChunk is the size of the raw producer's writes and the raw
// consumer's reads.
const rawChunk = 4 << 20

// benchFile is the Parquet file shared by the sub-benchmarks.
type benchFile struct {
	path     string
	rows     int64
	rowBytes int64 // float32 bytes per row, label included
	size     int64 // bytes on disk
}

var (
	benchOnce sync.Once
	benchData benchFile
	benchErr  error
	benchDir  string
)

// removeBenchData deletes the benchmark's file; TestMain calls it.
func removeBenchData() {
	if benchDir != "" {
		_ = os.RemoveAll(benchDir)
	}
}

func getBenchFile(b *testing.B) benchFile {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "spindle-feed-bench")
		if benchErr == nil {
			benchData, benchErr = writeBenchParquet(filepath.Join(benchDir, "features.parquet"), *benchRows, *benchFeatures)
		}
	})
	if benchErr != nil {
		b.Fatalf("write benchmark data: %v", benchErr)
	}
	return benchData
}

// writeBenchParquet writes rows rows of nf random features (-feed.type)
// and a float32 label in row groups of 64Ki rows.
func writeBenchParquet(path string, rows, nf int) (benchFile, error) {
	const rowGroup = 1 << 16
	var featureType arrow.DataType
	switch *benchType {
	case "float32":
		featureType = arrow.PrimitiveTypes.Float32
	case "float64":
		featureType = arrow.PrimitiveTypes.Float64
	default:
		return benchFile{}, fmt.Errorf("-feed.type %q: want float32 or float64", *benchType)
	}
	fields := make([]arrow.Field, nf+1)
	for j := range nf {
		fields[j] = arrow.Field{Name: fmt.Sprintf("f%d", j), Type: featureType}
	}
	fields[nf] = arrow.Field{Name: "label", Type: arrow.PrimitiveTypes.Float32}
	schema := arrow.NewSchema(fields, nil)
	codec, err := parseCodec(*benchCodec)
	if err != nil {
		return benchFile{}, err
	}
	f, err := os.Create(path)
	if err != nil {
		return benchFile{}, err
	}
	defer f.Close()
	props := parquet.NewWriterProperties(
		parquet.WithCompression(codec),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(rowGroup),
	)
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return benchFile{}, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	vals := make([]float32, rowGroup)
	for done := 0; done < rows; done += rowGroup {
		n := min(rowGroup, rows-done)
		for j := range nf + 1 {
			for i := range vals[:n] {
				vals[i] = rng.Float32()
			}
			switch fb := bld.Field(j).(type) {
			case *array.Float32Builder:
				fb.AppendValues(vals[:n], nil)
			case *array.Float64Builder:
				for range n { // full mantissas, as incompressible as the float32 ones
					fb.Append(rng.Float64())
				}
			}
		}
		rec := bld.NewRecordBatch()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			return benchFile{}, err
		}
	}
	if err := w.Close(); err != nil {
		return benchFile{}, err
	}
	// Write the file back now, not while the first sub-benchmark runs.
	// (Closing the Parquet writer closed f.)
	if err := syncFile(path); err != nil {
		return benchFile{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return benchFile{}, err
	}
	return benchFile{path: path, rows: int64(rows), rowBytes: int64(4 * (nf + 1)), size: fi.Size()}, nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func parseCodec(s string) (compress.Compression, error) {
	switch s {
	case "snappy":
		return compress.Codecs.Snappy, nil
	case "zstd":
		return compress.Codecs.Zstd, nil
	case "uncompressed", "none":
		return compress.Codecs.Uncompressed, nil
	}
	return 0, fmt.Errorf("unknown codec %q (want snappy, zstd or uncompressed)", s)
}

// newBenchPipeline is the feed pipeline an executor would build for a
// one-rank job over path: planned by feed.Plan, read by feed.Pipeline,
// prefetch batches ahead on a goroutine of its own, float64 features
// read as float32 for the tensor feed (mode tensor), arrow batches
// decoded into region when there is one.
func newBenchPipeline(ctx context.Context, path string, mode Mode, batchRows, prefetch int, cacheBytes int64, region *SharedRegion) (*feed.Pipeline, error) {
	res := fsys.NewResolver(fsys.Options{})
	jp, err := plan.Plan(ctx, res, feed.PlanRequest{Inputs: []string{path}, Ranks: 1, LabelColumn: "label"})
	if err != nil {
		return nil, err
	}
	cfg := feed.PipelineConfig{
		Splits:      jp.Ranks[0],
		Schema:      jp.Schema,
		LabelColumn: "label",
		BatchRows:   batchRows,
		Prefetch:    prefetch,
		EvenBatches: feed.EvenOff,
		CacheBytes:  cacheBytes,

		Float32Features: mode == ModeTensor,
	}
	if region != nil {
		cfg.BatchMemory = region
	}
	return feed.NewPipeline(res, cfg)
}

// warmCache reads one epoch of pipe, filling its cache.
func warmCache(ctx context.Context, pipe *feed.Pipeline) error {
	r, err := pipe.Epoch(ctx, 0)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rec.Release()
	}
}

// consumerResult is what the consumer process reports.
type consumerResult struct {
	Rows    int64   `json:"rows"`
	Bytes   int64   `json:"bytes"` // payload bytes
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the consumer's user and system time while consuming:
	// what taking the data costs the training process.
	CPUSeconds float64 `json:"cpu_seconds"`
}

// cpuTime returns the process's user plus system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runConsumer is the consumer process's main: it says "ready", waits for
// a line on stdin, consumes, and prints a consumerResult as JSON.
func runConsumer(role string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "consumer %s: %v\n", role, err)
		return 1
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fail(err)
	}
	if path := os.Getenv(consumerProfileEnv); path != "" {
		f, err := os.Create(path + "." + role)
		if err != nil {
			return fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	sock := os.Getenv(consumerSocketEnv)
	start, startCPU := time.Now(), cpuTime()
	var res consumerResult
	var err error
	switch role {
	case "raw":
		res, err = consumeRaw(sock)
	case "arrow":
		res, err = consumeArrow(ctx, sock)
	case "tensor":
		res, err = consumeTensor(ctx, sock)
	case "decode":
		res, err = consumeDecode(ctx)
	default:
		err = fmt.Errorf("unknown role")
	}
	if err != nil {
		return fail(err)
	}
	res.Seconds = time.Since(start).Seconds()
	res.CPUSeconds = (cpuTime() - startCPU).Seconds()
	js, _ := json.Marshal(res)
	fmt.Println(string(js))
	return 0
}

// consumeRaw reads connections until one carries nothing.
func consumeRaw(sock string) (consumerResult, error) {
	buf := make([]byte, rawChunk)
	var res consumerResult
	for {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return res, err
		}
		_ = c.(*net.UnixConn).SetReadBuffer(socketBufferBytes)
		var n int64
		for {
			k, err := c.Read(buf)
			n += int64(k)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				c.Close()
				return res, err
			}
		}
		c.Close()
		if n == 0 {
			return res, nil
		}
		res.Bytes += n
	}
}

// rowWidth is the bytes of a row of schema's fixed-width columns.
func rowWidth(schema *arrow.Schema) int64 {
	var width int64
	for _, f := range schema.Fields() {
		width += int64(f.Type.(arrow.FixedWidthDataType).BitWidth() / 8)
	}
	return width
}

func consumeArrow(ctx context.Context, sock string) (consumerResult, error) {
	var res consumerResult
	for {
		ep, err := DialArrow(ctx, sock)
		if err != nil {
			return res, err
		}
		if ep.Epoch() < 0 {
			return res, ep.Close()
		}
		width := rowWidth(ep.Schema())
		for {
			rec, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				ep.Close()
				return res, err
			}
			res.Rows += rec.NumRows()
			res.Bytes += rec.NumRows() * width
			rec.Release()
		}
		ep.Close()
	}
}

func consumeTensor(ctx context.Context, sock string) (consumerResult, error) {
	var res consumerResult
	for {
		ep, err := DialTensor(ctx, sock)
		if err != nil {
			return res, err
		}
		if ep.Epoch() < 0 {
			return res, ep.Close()
		}
		for {
			b, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				ep.Close()
				return res, err
			}
			res.Rows += int64(b.Rows)
			res.Bytes += 4 * int64(len(b.Features)+len(b.Labels))
		}
		ep.Close()
	}
}

// consumeDecode reads the Parquet file itself through the feed pipeline,
// loops times, with no read-ahead goroutine: the cost of decoding alone.
func consumeDecode(ctx context.Context) (consumerResult, error) {
	var res consumerResult
	loops, err := strconv.Atoi(os.Getenv(consumerLoopsEnv))
	if err != nil {
		return res, err
	}
	batchRows, err := strconv.Atoi(os.Getenv(consumerBatchEnv))
	if err != nil {
		return res, err
	}
	src, err := newBenchPipeline(ctx, os.Getenv(consumerFileEnv), ModeArrow, batchRows, 0, 0, nil)
	if err != nil {
		return res, err
	}
	defer src.Close()
	width := rowWidth(src.Schema())
	for range loops {
		r, err := src.Epoch(ctx, 0)
		if err != nil {
			return res, err
		}
		for {
			rec, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Close()
				return res, err
			}
			res.Rows += rec.NumRows()
			res.Bytes += rec.NumRows() * width
			rec.Release()
		}
		if err := r.Close(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// pyConsumer is the Python consumer process: like runConsumer, it says
// "ready", waits for a line, reads every epoch with the spindle package
// (argv[1]: arrow or tensor) and prints a consumerResult.
const pyConsumer = `
import json, sys, time
import spindle
mode = sys.argv[1]
print("ready", flush=True)
sys.stdin.readline()
t0, c0 = time.perf_counter(), time.process_time()
rows = nbytes = 0
while True:
    ep = spindle.tensors() if mode == "tensor" else spindle.batches()
    if ep.end_of_feed:
        break
    for b in ep:
        cols = list(b) if mode == "tensor" else list(b.values())
        rows += len(cols[0])
        nbytes += sum(c.nbytes for c in cols if c is not None)
    ep.close()
print(json.dumps({"rows": rows, "bytes": nbytes, "seconds": time.perf_counter() - t0,
                  "cpu_seconds": time.process_time() - c0}), flush=True)
`

// consumer runs the consumer process and times it from the moment it is
// told to start until it reports. With timed, b's timer runs over exactly
// that span.
func consumer(b *testing.B, timed bool, role string, env ...string) (consumerResult, time.Duration) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), append([]string{consumerEnv + "=" + role}, env...)...)
	if mode, ok := strings.CutPrefix(role, "python-"); ok {
		pkgDir, err := filepath.Abs(filepath.Join("..", "..", "python"))
		if err != nil {
			b.Fatal(err)
		}
		cmd = exec.Command(pyInterpreter, "-c", pyConsumer, mode)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pkgDir, "SPINDLE_PYARROW=0", "SPINDLE_FEED_MODE="+mode)
		for _, e := range env {
			if sock, ok := strings.CutPrefix(e, consumerSocketEnv+"="); ok {
				cmd.Env = append(cmd.Env, "SPINDLE_FEED="+sock)
			}
		}
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		_ = cmd.Wait()
		b.Fatalf("consumer did not start: %q %v %s", line, err, stderr.String())
	}
	if timed {
		b.ResetTimer()
		b.StartTimer()
	}
	start := time.Now()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		b.Fatal(err)
	}
	line, err := out.ReadString('\n')
	elapsed := time.Since(start)
	if timed {
		b.StopTimer()
	}
	werr := cmd.Wait()
	if err != nil || werr != nil {
		b.Fatalf("consumer %s: %v %v: %s", role, err, werr, stderr.String())
	}
	var res consumerResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		b.Fatalf("consumer %s said %q: %v", role, line, err)
	}
	return res, elapsed
}

// rawKind says where the raw producer's bytes come from.
type rawKind int

const (
	// rawStream writes a buffer as large as the payload front to back,
	// so that the bytes come from memory, as a feed's batches do. Feed
	// rates are compared with it.
	rawStream rawKind = iota
	// rawHot writes one rawChunk buffer over and over; it stays in the
	// CPU cache, which makes it the socket's best case.
	rawHot
)

// streamBuf is rawStream's source, kept from run to run (the benchmark
// runs one at a time).
var streamBuf []byte

// rawSource returns the bytes the raw producer sends size of.
func rawSource(kind rawKind, size int64) []byte {
	fill := func(b []byte) []byte {
		for i := range b {
			b[i] = byte(i) // touches every page: nothing maps the zero page
		}
		return b
	}
	if kind == rawHot {
		return fill(make([]byte, rawChunk))
	}
	if int64(len(streamBuf)) < size {
		streamBuf = fill(make([]byte, size))
	}
	return streamBuf[:size]
}

// runRaw moves size bytes loops times from a goroutine of this process to
// a consumer process over a Unix socket, writing rawChunk bytes of the
// kind's source at a time; the consumer reads into one rawChunk buffer.
func runRaw(b *testing.B, timed bool, loops int, size int64, kind rawKind) (consumerResult, time.Duration) {
	sock := filepath.Join(shortBenchDir(b), "raw.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	src := rawSource(kind, size)
	g.Go(func() error { return serveRaw(ctx, ln, loops, size, src) })
	res, elapsed := consumer(b, timed, "raw", consumerSocketEnv+"="+sock)
	cancel()
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return res, elapsed
}

// serveRaw writes size bytes of src (cycling through it) on each of the
// first n connections, then closes later ones at once, until ctx ends.
func serveRaw(ctx context.Context, ln *net.UnixListener, n int, size int64, src []byte) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	for i := 0; ; i++ {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		_ = c.SetWriteBuffer(socketBufferBytes)
		if i < n {
			for off := int64(0); off < size; {
				at := off % int64(len(src))
				k, err := c.Write(src[at:min(at+rawChunk, int64(len(src)), at+size-off)])
				off += int64(k)
				if err != nil {
					c.Close()
					return err
				}
			}
		}
		c.Close()
	}
}

// gbps is a consumer's payload rate in GB/s.
func gbps(res consumerResult, elapsed time.Duration) float64 {
	return float64(res.Bytes) / elapsed.Seconds() / 1e9
}

type benchLine struct {
	name       string
	rowsPerSec float64
	gbPerSec   float64
	rawGBs     float64 // the raw rate it is compared with (rawStream)
	hotGBs     float64 // the raw rate of rawHot
	xRaw, xHot float64
	xDecd      float64 // rows/s over decoding's
	cpuPerGB   float64 // consumer CPU seconds per GB of payload
	xDecodeCPU float64 // consumer CPU per row over decoding's
}

// baselines are the rates a path is compared with, measured right after
// it with the same bytes.
type baselines struct {
	raw, hot     float64 // GB/s; zero when not measured
	decodeRows   float64 // rows/s when the consumer decodes alone
	decodeCPURow float64 // consumer CPU seconds per row then
}

// cpuPerGB is a consumer's CPU time per GB of payload.
func cpuPerGB(res consumerResult) float64 {
	if res.Bytes == 0 {
		return 0
	}
	return res.CPUSeconds / (float64(res.Bytes) / 1e9)
}

func BenchmarkFeed(b *testing.B) {
	data := getBenchFile(b)
	var batchSizes []int
	for _, s := range strings.Split(*benchBatchRows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("-feed.batch-rows: bad size %q", s)
		}
		batchSizes = append(batchSizes, n)
	}
	payload := data.rows * data.rowBytes
	b.Logf("data: %d rows × %d bytes = %.0f MB of float32 in a %.0f MB Parquet file (%s, %s features)",
		data.rows, data.rowBytes, float64(payload)/1e6, float64(data.size)/1e6, *benchCodec, *benchType)

	var lines []benchLine
	report := func(b *testing.B, name string, res consumerResult, base baselines) {
		secs := b.Elapsed().Seconds()
		if res.Rows == 0 && res.Bytes > 0 {
			res.Rows = res.Bytes / data.rowBytes
		}
		l := benchLine{name: name, rowsPerSec: float64(res.Rows) / secs, gbPerSec: float64(res.Bytes) / secs / 1e9}
		b.ReportMetric(l.rowsPerSec, "rows/s")
		b.ReportMetric(l.gbPerSec, "GB/s")
		b.SetBytes(res.Bytes / int64(b.N))
		if base.raw > 0 {
			l.rawGBs, l.xRaw = base.raw, l.gbPerSec/base.raw
			b.ReportMetric(base.raw, "raw-GB/s")
			b.ReportMetric(l.xRaw, "x-raw")
		}
		if base.hot > 0 {
			l.hotGBs, l.xHot = base.hot, l.gbPerSec/base.hot
			b.ReportMetric(l.xHot, "x-hot")
		}
		// Against decoding alone, rows: with float64 features the arrow
		// paths carry twice the bytes the tensor paths do.
		if base.decodeRows > 0 {
			l.xDecd = l.rowsPerSec / base.decodeRows
			b.ReportMetric(l.xDecd, "x-decode")
		}
		l.cpuPerGB = cpuPerGB(res)
		b.ReportMetric(l.cpuPerGB, "consumer-cpu-s/GB")
		if base.decodeCPURow > 0 && res.Rows > 0 {
			l.xDecodeCPU = res.CPUSeconds / float64(res.Rows) / base.decodeCPURow
			b.ReportMetric(l.xDecodeCPU, "x-decode-cpu")
		}
		// Keep only the last (longest) invocation of each sub-benchmark.
		for i := range lines {
			if lines[i].name == name {
				lines[i] = l
				return
			}
		}
		lines = append(lines, l)
	}

	b.Run("raw", func(b *testing.B) {
		b.StopTimer()
		res, _ := runRaw(b, true, b.N, payload, rawStream)
		hot, hotTime := runRaw(b, false, b.N, payload, rawHot)
		report(b, "raw", res, baselines{hot: gbps(hot, hotTime)})
	})
	// rawBase measures both raw rates for n bytes per loop.
	rawBase := func(b *testing.B, n int64) baselines {
		raw, rawTime := runRaw(b, false, b.N, n, rawStream)
		hot, hotTime := runRaw(b, false, b.N, n, rawHot)
		return baselines{raw: gbps(raw, rawTime), hot: gbps(hot, hotTime)}
	}

	for _, batchRows := range batchSizes {
		decode := func(b *testing.B, timed bool) (consumerResult, time.Duration) {
			return consumer(b, timed, "decode",
				consumerFileEnv+"="+data.path,
				consumerLoopsEnv+"="+strconv.Itoa(b.N),
				consumerBatchEnv+"="+strconv.Itoa(batchRows))
		}
		name := fmt.Sprintf("decode/batch=%d", batchRows)
		b.Run(name, func(b *testing.B) {
			b.StopTimer()
			res, _ := decode(b, true)
			report(b, name, res, rawBase(b, res.Bytes/int64(b.N)))
		})
		// -shm: through shared memory (ServerConfig.SharedMemory).
		// python-: the consumer is the spindle Python package (from Parquet only).
		for _, path := range []string{"arrow", "arrow-shm", "tensor", "tensor-shm",
			"python-arrow", "python-arrow-shm", "python-tensor", "python-tensor-shm"} {
			python := strings.HasPrefix(path, "python-")
			mode := Mode(strings.TrimSuffix(strings.TrimPrefix(path, "python-"), "-shm"))
			shm := strings.HasSuffix(path, "-shm")
			for _, from := range []string{"parquet", "cached"} {
				if python && from == "cached" {
					continue
				}
				name := fmt.Sprintf("%s/%s/batch=%d", path, from, batchRows)
				b.Run(name, func(b *testing.B) {
					b.StopTimer()
					if python && exec.Command(pyInterpreter, "-c", "import numpy").Run() != nil {
						b.Skipf("%s with numpy is not here", pyInterpreter)
					}
					var cacheBytes int64
					if from == "cached" {
						cacheBytes = 4 * payload
					}
					// As an executor does: arrow batches decoded into the
					// shared memory they are sent from.
					var region *SharedRegion
					if shm && mode == ModeArrow && !*benchNoLend {
						var err error
						if region, err = NewSharedRegion(0); err != nil {
							b.Fatal(err)
						}
						defer func() {
							if err := region.Close(); err != nil {
								b.Error(err)
							}
						}()
					}
					pipe, err := newBenchPipeline(context.Background(), data.path, mode, batchRows, 8, cacheBytes, region)
					if err != nil {
						b.Fatal(err)
					}
					defer pipe.Close()
					if from == "cached" {
						if err := warmCache(context.Background(), pipe); err != nil {
							b.Fatal(err)
						}
					}
					srv, err := NewServer(ServerConfig{
						SocketPath:   filepath.Join(shortBenchDir(b), "feed.sock"),
						Mode:         mode,
						SharedMemory: shm,
						Epochs:       b.N,
						Source:       pipe,
						LabelColumn:  "label",
						SharedRegion: region,
					})
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithCancel(context.Background())
					var g errgroup.Group
					g.Go(func() error { return srv.Run(ctx) })
					role := string(mode)
					if python {
						role = "python-" + role
					}
					res, _ := consumer(b, true, role, consumerSocketEnv+"="+srv.cfg.SocketPath)
					cancel()
					if err := g.Wait(); err != nil {
						b.Fatal(err)
					}
					if res.Rows != data.rows*int64(b.N) {
						b.Fatalf("consumer got %d rows, want %d", res.Rows, data.rows*int64(b.N))
					}
					// The machine's load changes from second to second: compare
					// with raw bandwidth and decoding measured right after, not
					// a minute earlier.
					base := rawBase(b, res.Bytes/int64(b.N))
					dres, dtime := decode(b, false)
					base.decodeRows = float64(dres.Rows) / dtime.Seconds()
					base.decodeCPURow = dres.CPUSeconds / float64(max(dres.Rows, 1))
					report(b, name, res, base)
				})
			}
		}
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nfeed benchmark: %d rows × %d columns, %s features (%.0f MB payload as float32), Parquet %s %.0f MB\n",
		data.rows, data.rowBytes/4, *benchType, float64(payload)/1e6, *benchCodec, float64(data.size)/1e6)
	fmt.Fprintf(&sb, "raw: the same bytes streamed from memory; hot: one 4 MiB buffer sent over and over (cache-hot)\n")
	fmt.Fprintf(&sb, "cpu s/GB: the consumer's CPU time per GB taken; x-decode, x-dec-cpu: rows/s and the consumer's CPU per row over the same when it decodes alone\n")
	fmt.Fprintf(&sb, "%-26s %12s %7s %9s %7s %9s %7s %9s %9s %10s\n", "path", "rows/s", "GB/s", "raw GB/s", "x-raw", "hot GB/s", "x-hot", "x-decode", "cpu s/GB", "x-dec-cpu")
	ratio := func(v float64) string {
		if v == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, l := range lines {
		fmt.Fprintf(&sb, "%-26s %12.0f %7.2f %9s %7s %9s %7s %9s %9s %10s\n", l.name, l.rowsPerSec, l.gbPerSec,
			ratio(l.rawGBs), ratio(l.xRaw), ratio(l.hotGBs), ratio(l.xHot), ratio(l.xDecd), ratio(l.cpuPerGB), ratio(l.xDecodeCPU))
	}
	fmt.Print(sb.String())
}

// shortBenchDir is shortTempDir for benchmarks.
func shortBenchDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "swb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
