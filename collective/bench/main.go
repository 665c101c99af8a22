// Command bench measures Spindle's ring allreduce beside PyTorch gloo's
// allreduce, in the same run, on this machine: the same float32 tensor
// sizes, the same numbers of ranks (separate processes on 127.0.0.1), the
// same timing method. It prints bus bandwidth, 2(n-1)/n × bytes / time,
// for both and their ratio.
//
// Usage:
//
//	go run ./collective/bench [-ranks 2,4] [-sizes 1,16,64] [-gloo=false]
//
// Each rank is a child process joined exactly as under a Spindle executor:
// an inherited listener on its peer port (SPINDLE_PEER_LISTEN_FD) and the
// SPINDLE_* environment. Every timed iteration starts with a barrier; each
// rank times its own allreduce, the iteration counts as the slowest rank's
// time, and the reported time is the median over the iterations after the
// warm-up. The gloo side (gloo_allreduce.py, run with -python) does the
// same with torch.distributed; it is skipped, with a message, when torch
// cannot be imported.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spindle-ml/spindle/collective"
)

//go:embed gloo_allreduce.py
var glooScript []byte

// Environment of the worker processes, beside the SPINDLE_* contract.
const (
	envWorker  = "SPINDLE_BENCH_WORKER"
	envPlan    = "SPINDLE_BENCH_PLAN"
	envWarmup  = "SPINDLE_BENCH_WARMUP"
	envChunk   = "SPINDLE_BENCH_CHUNK_BYTES"
	envSockBuf = "SPINDLE_BENCH_SOCKET_BUFFER"
	envProfile = "SPINDLE_BENCH_CPUPROFILE"
)

func main() {
	if os.Getenv(envWorker) != "" {
		if err := worker(); err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// step is one tensor size and how many timed iterations it gets.
type step struct {
	Bytes int `json:"bytes"`
	Iters int `json:"iters"`
}

// result is what both the Go workers and the gloo script print.
type result struct {
	World   int          `json:"world"`
	Results []sizeResult `json:"results"`
	Skipped string       `json:"skipped,omitempty"`
}

// sizeResult holds the timings of one tensor size.
type sizeResult struct {
	Bytes   int       `json:"bytes"`
	Iters   int       `json:"iters"`
	MedianS float64   `json:"median_s"`
	TimesS  []float64 `json:"times_s"`
}

func run() error {
	ranksFlag := flag.String("ranks", "2,4", "comma-separated world sizes")
	sizesFlag := flag.String("sizes", "1,16,64", "comma-separated tensor sizes in MiB")
	iters := flag.Int("iters", 0, "timed iterations per size and round (0: from 20 for small tensors down to 6 for 64 MiB)")
	warmup := flag.Int("warmup", 2, "untimed iterations per size and round")
	rounds := flag.Int("rounds", 3, "alternating rounds of Spindle and gloo per number of ranks")
	gloo := flag.Bool("gloo", true, "measure PyTorch gloo beside Spindle")
	python := flag.String("python", "/usr/bin/python3", "Python interpreter with torch, for the gloo side")
	chunk := flag.Int("chunk", 0, "Spindle chunk size in bytes (0: the library default)")
	sockBuf := flag.Int("sockbuf", 0, "Spindle socket buffer size in bytes (0: the library default, -1: kernel autotuning)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	profile := flag.String("cpuprofile", "", "write each Spindle rank's CPU profile to `dir`/ranks-N-rank-R.pprof")
	flag.Parse()
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			return err
		}
		os.Setenv(envProfile, *profile)
	}

	worlds, err := parseInts(*ranksFlag)
	if err != nil {
		return fmt.Errorf("-ranks: %w", err)
	}
	sizes, err := parseInts(*sizesFlag)
	if err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	var plan []step
	for _, mib := range sizes {
		n := *iters
		if n == 0 {
			n = min(20, max(6, 256/mib))
		}
		plan = append(plan, step{Bytes: mib << 20, Iters: n})
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var script string
	if *gloo {
		dir, err := os.MkdirTemp("", "spindle-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		script = filepath.Join(dir, "gloo_allreduce.py")
		if err := os.WriteFile(script, glooScript, 0o644); err != nil {
			return err
		}
	}

	// Rounds alternate Spindle and gloo, so that load from other processes
	// on the machine falls on both alike; each size's time is the median of
	// the iterations of all rounds.
	type key struct{ world, bytes int }
	ours := map[key][]float64{}
	theirs := map[key][]float64{}
	glooNote := ""
	for _, n := range worlds {
		for round := 1; round <= *rounds; round++ {
			fmt.Fprintf(os.Stderr, "%d ranks, round %d of %d: spindle", n, round, *rounds)
			res, err := runSpindle(ctx, n, plan, *warmup, *chunk, *sockBuf)
			if err != nil {
				return fmt.Errorf("spindle with %d ranks: %w", n, err)
			}
			for _, s := range res.Results {
				ours[key{n, s.Bytes}] = append(ours[key{n, s.Bytes}], s.TimesS...)
			}
			if *gloo && glooNote == "" {
				fmt.Fprint(os.Stderr, ", gloo")
				res, err := runGloo(ctx, *python, script, n, plan, *warmup)
				switch {
				case err != nil:
					glooNote = err.Error()
				case res.Skipped != "":
					glooNote = res.Skipped
				default:
					for _, s := range res.Results {
						theirs[key{n, s.Bytes}] = append(theirs[key{n, s.Bytes}], s.TimesS...)
					}
				}
			}
			fmt.Fprintln(os.Stderr)
		}
	}

	fmt.Printf("\nallreduce (sum) of float32 tensors between processes over 127.0.0.1; %d CPUs, load average %s\n", runtime.NumCPU(), loadAverage())
	fmt.Printf("bus bandwidth = 2(n-1)/n x bytes / time; time = median of the timed iterations of %d alternating rounds\n", *rounds)
	fmt.Printf("(each iteration: barrier, then the slowest rank's allreduce time; %d warm-up iterations per size and round)\n\n", *warmup)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ranks\tsize\titers\tspindle GB/s\tspindle ms\tgloo GB/s\tgloo ms\tspindle/gloo\t")
	for _, n := range worlds {
		for _, s := range plan {
			k := key{n, s.Bytes}
			t := median(ours[k])
			bw := busBW(n, s.Bytes, t)
			line := fmt.Sprintf("%d\t%d MiB\t%d\t%.2f\t%.2f\t", n, s.Bytes>>20, len(ours[k]), bw, t*1e3)
			if g := theirs[k]; len(g) > 0 {
				gt := median(g)
				gbw := busBW(n, s.Bytes, gt)
				line += fmt.Sprintf("%.2f\t%.2f\t%.2fx\t", gbw, gt*1e3, bw/gbw)
			} else {
				line += "-\t-\t-\t"
			}
			fmt.Fprintln(tw, line)
		}
	}
	tw.Flush()
	if *gloo && glooNote != "" {
		fmt.Printf("\ngloo skipped: %s\n", glooNote)
	}
	return nil
}

func busBW(world, nbytes int, secs float64) float64 {
	return 2 * float64(world-1) / float64(world) * float64(nbytes) / secs / 1e9
}

// runSpindle starts n worker processes joined like training processes
// under an executor and returns rank 0's report.
func runSpindle(ctx context.Context, n int, plan []step, warmup, chunk, sockBuf int) (result, error) {
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	peers := make([]string, n)
	files := make([]*os.File, n)
	for r := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return result{}, err
		}
		peers[r] = ln.Addr().String()
		files[r], err = ln.(*net.TCPListener).File()
		ln.Close() // the duplicate in files[r] keeps the socket listening
		if err != nil {
			return result{}, err
		}
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return result{}, err
	}
	cmds := make([]*exec.Cmd, n)
	var out bytes.Buffer
	for r := range n {
		cmd := exec.CommandContext(ctx, self)
		cmd.ExtraFiles = []*os.File{files[r]}
		cmd.Env = append(os.Environ(),
			envWorker+"=1",
			envPlan+"="+string(planJSON),
			envWarmup+"="+strconv.Itoa(warmup),
			envChunk+"="+strconv.Itoa(chunk),
			envSockBuf+"="+strconv.Itoa(sockBuf),
			collective.EnvRank+"="+strconv.Itoa(r),
			collective.EnvWorldSize+"="+strconv.Itoa(n),
			collective.EnvPeers+"="+strings.Join(peers, ","),
			collective.EnvPeerFD+"=3",
			collective.EnvJobID+"=bench",
			collective.EnvTimeoutSecs+"=60",
		)
		cmd.Stderr = os.Stderr
		if r == 0 {
			cmd.Stdout = &out
		}
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
		cmds[r] = cmd
	}
	var errs []error
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", r, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return result{}, fmt.Errorf("rank 0 report %q: %w", out.String(), err)
	}
	return res, nil
}

// runGloo runs the gloo script with the same plan.
func runGloo(ctx context.Context, python, script string, n int, plan []step, warmup int) (result, error) {
	if _, err := exec.LookPath(python); err != nil {
		return result{Skipped: fmt.Sprintf("%s not found", python)}, nil
	}
	var items []string
	for _, s := range plan {
		items = append(items, fmt.Sprintf("%d:%d", s.Bytes, s.Iters))
	}
	cmd := exec.CommandContext(ctx, python, script, "--world", strconv.Itoa(n), "--plan", strings.Join(items, ","), "--warmup", strconv.Itoa(warmup))
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s %s: %w\n%s", python, filepath.Base(script), err, tail(errOut.String(), 2000))
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return result{}, fmt.Errorf("gloo report %q: %w", out.String(), err)
	}
	return res, nil
}

// worker is one rank of the Spindle side.
func worker() error {
	ctx := context.Background()
	cfg, err := collective.ConfigFromEnv()
	if err != nil {
		return err
	}
	var plan []step
	if err := json.Unmarshal([]byte(os.Getenv(envPlan)), &plan); err != nil {
		return fmt.Errorf("%s: %w", envPlan, err)
	}
	warmup, err := strconv.Atoi(os.Getenv(envWarmup))
	if err != nil {
		return fmt.Errorf("%s: %w", envWarmup, err)
	}
	if v, _ := strconv.Atoi(os.Getenv(envChunk)); v != 0 {
		cfg.ChunkBytes = v
	}
	if v, _ := strconv.Atoi(os.Getenv(envSockBuf)); v != 0 {
		cfg.SocketBufferBytes = v
	}
	comm, err := collective.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer comm.Close()
	if dir := os.Getenv(envProfile); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("ranks-%d-rank-%d.pprof", comm.WorldSize(), comm.Rank())))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	n := comm.WorldSize()
	want := float32(n * (n + 1) / 2)
	var res result
	res.World = n
	for _, s := range plan {
		data := make([]float32, s.Bytes/4)
		fill := func() {
			for i := range data {
				data[i] = float32(comm.Rank() + 1)
			}
		}
		for range warmup {
			fill()
			if err := collective.AllReduce(ctx, comm, data, collective.Sum); err != nil {
				return err
			}
		}
		times := make([]float64, s.Iters)
		for i := range times {
			fill()
			if err := comm.Barrier(ctx); err != nil {
				return err
			}
			start := time.Now()
			if err := collective.AllReduce(ctx, comm, data, collective.Sum); err != nil {
				return err
			}
			times[i] = time.Since(start).Seconds()
		}
		if data[0] != want || data[len(data)-1] != want {
			return fmt.Errorf("rank %d: allreduce result %v, want %v", comm.Rank(), data[0], want)
		}
		// The slowest rank defines each iteration's time.
		all := make([]float64, n*len(times))
		if err := collective.AllGather(ctx, comm, times, all); err != nil {
			return err
		}
		for i := range times {
			for r := range n {
				times[i] = max(times[i], all[r*len(times)+i])
			}
		}
		res.Results = append(res.Results, sizeResult{Bytes: s.Bytes, Iters: s.Iters, MedianS: median(times), TimesS: times})
	}
	if comm.Rank() == 0 {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q: want positive integers", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
