package feed

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The machine's own 2-thread speedup for the feed's work: two 1-thread
// Spindle processes decoding the same file at once, against one alone.
// They share nothing but the machine (its cores, caches, memory bus and
// kernel) and never wait on each other: what they reach together is what
// this machine gives the same work with no coordination. One process's
// two decode workers can do worse (they meet at every batch) or better
// (they take turns with one buffer pool's cache-warm buffers, where two
// processes each fill the shared cache with their own).

// scanProcessEnv, set in the environment of this test binary, makes it a
// scan process (runScanProcess) instead of running tests; its value is
// the scanRequest as JSON.
const scanProcessEnv = "SPINDLE_BENCH_SCAN_PROCESS"

// scanRequest is a scan process's work: Epochs timed epochs of the file
// at Path, planned for one rank, after two untimed ones.
type scanRequest struct {
	Path   string `json:"path"`
	Epochs int    `json:"epochs"`
}

// scanReport is what a scan process timed.
type scanReport struct {
	Rows    int64   `json:"rows"`
	Seconds float64 `json:"seconds"`
}

// Lines of a scan process's standard output.
const (
	scanReady  = "scan ready"  // warmed up; waiting for a line on standard input
	scanResult = "scan result" // followed by the scanReport as JSON
)

// runScanProcess is the scan process: one decode worker on GOMAXPROCS=1,
// later epochs of one pipeline (footers parsed, the buffer pool filled),
// as spindleLaterEpochs times in-process. It starts timing when its
// standard input gives it a line, so that two of them start together.
func runScanProcess(request string) error {
	var req scanRequest
	if err := json.Unmarshal([]byte(request), &req); err != nil {
		return fmt.Errorf("read the scan request %q: %w", request, err)
	}
	runtime.GOMAXPROCS(1)
	ctx := context.Background()
	p, err := planPipeline(ctx, newResolver(), req.Path, decodeBenchConfig(1))
	if err != nil {
		return err
	}
	defer p.Close()
	for n := range 2 {
		if _, err := readEpoch(ctx, p, n); err != nil {
			return fmt.Errorf("%s: %w", req.Path, err)
		}
	}
	fmt.Println(scanReady)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("wait for the start: %w", err)
	}
	var rep scanReport
	t0 := time.Now()
	for n := range req.Epochs {
		rows, err := readEpoch(ctx, p, 2+n)
		if err != nil {
			return fmt.Errorf("%s: %w", req.Path, err)
		}
		rep.Rows += rows
	}
	rep.Seconds = time.Since(t0).Seconds()
	js, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Println(scanResult, string(js))
	return nil
}

// scanProcess is a running scan process.
type scanProcess struct {
	cmd   *exec.Cmd
	start io.WriteCloser
	out   *bufio.Scanner
}

// startScanProcess starts a scan process of req and waits until it is
// ready to be timed.
func startScanProcess(b *testing.B, req scanRequest) *scanProcess {
	b.Helper()
	js, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), scanProcessEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	start, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start a scan process of %s: %v", req.Path, err)
	}
	sp := &scanProcess{cmd: cmd, start: start, out: bufio.NewScanner(stdout)}
	if !sp.out.Scan() || sp.out.Text() != scanReady {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("a scan process of %s did not get ready (said %q)", req.Path, sp.out.Text())
	}
	return sp
}

// result waits for the process's report; the process has been started.
func (sp *scanProcess) result(b *testing.B) scanReport {
	b.Helper()
	var rep scanReport
	var found bool
	for sp.out.Scan() {
		if js, ok := strings.CutPrefix(sp.out.Text(), scanResult+" "); ok {
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				b.Fatalf("read a scan process's report %q: %v", js, err)
			}
			found = true
		}
	}
	if err := sp.cmd.Wait(); err != nil || !found {
		b.Fatalf("a scan process ended without a report: %v", err)
	}
	return rep
}

// spindleTwoProcesses returns the median, over reps rounds, of the rows/s
// two 1-thread scan processes reach together (both rows over the slower
// one's time) over one scan process's alone, the two alternating.
func spindleTwoProcesses(b *testing.B, f duckFile, reps int) float64 {
	req := scanRequest{Path: f.Path, Epochs: 3}
	run := func(n int) float64 {
		ps := make([]*scanProcess, n)
		for i := range ps {
			ps[i] = startScanProcess(b, req)
		}
		for _, sp := range ps {
			if _, err := io.WriteString(sp.start, "go\n"); err != nil {
				b.Fatalf("start a scan process: %v", err)
			}
			sp.start.Close()
		}
		var rows int64
		var secs float64
		for _, sp := range ps {
			rep := sp.result(b)
			if want := int64(req.Epochs) * f.Rows; rep.Rows != want {
				b.Fatalf("a scan process fed %d rows of %s, want %d", rep.Rows, f.Path, want)
			}
			rows, secs = rows+rep.Rows, max(secs, rep.Seconds)
		}
		return float64(rows) / secs
	}
	ratios := make([]float64, 0, reps)
	for range reps {
		one := run(1)
		ratios = append(ratios, run(2)/one)
	}
	return median(ratios)
}
