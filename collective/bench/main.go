// Command bench measures Spindle's ring allreduce beside PyTorch gloo's
// allreduce, in the same run, on this machine: the same float32 tensor
// sizes, the same numbers of ranks (separate processes on 127.0.0.1), the
// same timing method. It prints bus bandwidth, 2(n-1)/n × bytes / time,
// for both and their ratio.
//
// Usage:
//
//	go run ./collective/bench [-ranks 2,4] [-sizes 1,16,64] [-gloo=false]
//	go run ./collective/bench -links tcp,ucx-tcp,ucx-sm -perftest -sizes 4k,1m,64m -gloo=false
//
// -links measures Spindle's allreduce over each data link: tcp (the
// default link, which between ranks on one host moves the bytes through
// shared memory), tcp-sockets (the same link kept on TCP sockets), ucx
// (the UCX link as a job selects it, which keeps to Spindle's link where
// UCX brings no RDMA), ucx-tcp and ucx-sm (the UCX link forced onto every
// stream, rdma/ucx, with UCX_TLS=tcp or sm). -perftest measures UCX's own ucx_perftest (tag_bw between two
// processes on 127.0.0.1, Debian's ucx-utils) on the same transports in
// the same run: the ceiling for the UCX link.
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
	"log/slog"
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
	// The UCX data link, for -links ucx-tcp and ucx-sm.
	_ "github.com/spindle-ml/spindle/rdma/ucx"
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
	envSockets = "SPINDLE_BENCH_SOCKETS_ONLY"
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

// link is a data link the workers use: its SPINDLE_COLLECTIVE_LINK and
// UCX_TLS, and whether the TCP link keeps off shared memory.
type link struct {
	name, spec, tls string
	sockets         bool
}

var knownLinks = []link{
	{"tcp", "tcp", "", false},
	{"tcp-sockets", "tcp", "", true},
	{"ucx", "ucx", "", false},
	{"ucx-tcp", "ucx:forced", "tcp", false},
	{"ucx-sm", "ucx:forced", "sm", false},
}

// options are the command's flags.
type options struct {
	ranks    string
	sizes    string
	links    string
	perftest bool
	iters    int
	warmup   int
	rounds   int
	gloo     bool
	python   string
	chunk    int
	sockBuf  int
	timeout  time.Duration
	profile  string
}

// parseOptions reads the command's flags.
func parseOptions() options {
	var o options
	flag.StringVar(&o.ranks, "ranks", "2,4", "comma-separated world sizes")
	flag.StringVar(&o.sizes, "sizes", "1,16,64", "comma-separated tensor sizes in MiB, or with a unit: 4k, 1m, 64m")
	flag.StringVar(&o.links, "links", "tcp", "comma-separated data links: tcp (the default link: shared memory between ranks on one host), tcp-sockets (TCP only), ucx (as a job selects it: UCX only where it brings RDMA), ucx-tcp, ucx-sm (UCX forced)")
	flag.BoolVar(&o.perftest, "perftest", false, "measure ucx_perftest (tag_bw) on the transports of the UCX links, the ceiling")
	flag.IntVar(&o.iters, "iters", 0, "timed iterations per size and round (0: 6 to 200, fewer for larger tensors)")
	flag.IntVar(&o.warmup, "warmup", 2, "untimed iterations per size and round")
	flag.IntVar(&o.rounds, "rounds", 3, "alternating rounds of every link and baseline per number of ranks")
	flag.BoolVar(&o.gloo, "gloo", true, "measure PyTorch gloo beside Spindle")
	flag.StringVar(&o.python, "python", "/usr/bin/python3", "Python interpreter with torch, for the gloo side")
	flag.IntVar(&o.chunk, "chunk", 0, "Spindle chunk size in bytes (0: the library default)")
	flag.IntVar(&o.sockBuf, "sockbuf", 0, "Spindle socket buffer size in bytes (0: the library default, -1: kernel autotuning)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.StringVar(&o.profile, "cpuprofile", "", "write each Spindle rank's CPU profile to `dir`/ranks-N-rank-R.pprof")
	flag.Parse()
	return o
}

func run() error {
	o := parseOptions()
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
		os.Setenv(envProfile, o.profile)
	}

	worlds, err := parseInts(o.ranks)
	if err != nil {
		return fmt.Errorf("-ranks: %w", err)
	}
	sizes, err := parseSizes(o.sizes)
	if err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	links, err := parseLinks(o.links)
	if err != nil {
		return err
	}
	plan := planSteps(sizes, o.iters)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	var script string
	if o.gloo {
		dir, err := os.MkdirTemp("", "spindle-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if script, err = writeGlooScript(dir); err != nil {
			return err
		}
	}
	var transports []string // of ucx_perftest
	if o.perftest {
		transports = perftestTransports(links)
	}

	// Rounds alternate the links and baselines, so that load from other
	// processes on the machine falls on all alike; each size's time is the
	// median of the iterations of all rounds.
	m := measured{times: map[key][]float64{}, perfBW: map[key][]float64{}}
	times, perfBW := m.times, m.perfBW
	glooNote, perfNote := "", ""
	for _, n := range worlds {
		for round := 1; round <= o.rounds; round++ {
			fmt.Fprintf(os.Stderr, "%d ranks, round %d of %d:", n, round, o.rounds)
			for _, l := range links {
				fmt.Fprintf(os.Stderr, " %s", l.name)
				res, err := runSpindle(ctx, n, plan, o.warmup, o.chunk, o.sockBuf, l)
				if err != nil {
					return fmt.Errorf("spindle over %s with %d ranks: %w", l.name, n, err)
				}
				for _, s := range res.Results {
					times[key{l.name, n, s.Bytes}] = append(times[key{l.name, n, s.Bytes}], s.TimesS...)
				}
			}
			if o.gloo && glooNote == "" {
				fmt.Fprint(os.Stderr, " gloo")
				res, err := runGloo(ctx, o.python, script, n, plan, o.warmup)
				switch {
				case err != nil:
					glooNote = err.Error()
				case res.Skipped != "":
					glooNote = res.Skipped
				default:
					for _, s := range res.Results {
						times[key{"gloo", n, s.Bytes}] = append(times[key{"gloo", n, s.Bytes}], s.TimesS...)
					}
				}
			}
			// ucx_perftest is point to point: measured once per round,
			// in the rounds of the first world size.
			if n == worlds[0] && perfNote == "" {
				for _, tls := range transports {
					fmt.Fprintf(os.Stderr, " ucx_perftest(%s)", tls)
					for _, s := range plan {
						bw, err := runPerftest(ctx, tls, s.Bytes)
						if err != nil {
							perfNote = err.Error()
							break
						}
						perfBW[key{"perftest-" + tls, 0, s.Bytes}] = append(perfBW[key{"perftest-" + tls, 0, s.Bytes}], bw)
					}
				}
			}
			fmt.Fprintln(os.Stderr)
		}
	}

	m.glooNote, m.perfNote = glooNote, perfNote
	printTable(m, worlds, plan, links, transports, o.gloo, o.rounds, o.warmup)
	return nil
}

// parseLinks reads -links: names of knownLinks, comma-separated.
func parseLinks(s string) ([]link, error) {
	var links []link
	for _, name := range strings.Split(s, ",") {
		i := slices.IndexFunc(knownLinks, func(l link) bool { return l.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("-links: unknown link %q (want tcp, tcp-sockets, ucx, ucx-tcp or ucx-sm)", name)
		}
		links = append(links, knownLinks[i])
	}
	return links, nil
}

// planSteps times each size iters times, or, with iters 0, from 6 to
// 200 times, fewer for larger tensors.
func planSteps(sizes []int, iters int) []step {
	var plan []step
	for _, b := range sizes {
		n := iters
		if n == 0 {
			n = min(200, max(6, (256<<20)/b))
		}
		plan = append(plan, step{Bytes: b, Iters: n})
	}
	return plan
}

// writeGlooScript writes the gloo side's Python script into dir.
func writeGlooScript(dir string) (string, error) {
	script := filepath.Join(dir, "gloo_allreduce.py")
	return script, os.WriteFile(script, glooScript, 0o644)
}

// perftestTransports are the UCX transports of links, each once, for
// ucx_perftest.
func perftestTransports(links []link) []string {
	var transports []string
	for _, l := range links {
		if l.tls != "" && !slices.Contains(transports, l.tls) {
			transports = append(transports, l.tls)
		}
	}
	return transports
}

// key names one measured series: what ran, on how many ranks, at which
// size.
type key struct {
	what         string // a link's name, "gloo", or "perftest-TLS"
	world, bytes int
}

// measured is what the rounds measured: each series' times (seconds) and
// ucx_perftest's bandwidths (GB/s, world 0), and why a baseline was
// skipped, if it was.
type measured struct {
	times, perfBW      map[key][]float64
	glooNote, perfNote string
}

// printTable prints the bus bandwidth of every series, and the ratios
// between them, one line per number of ranks and size.
func printTable(m measured, worlds []int, plan []step, links []link, transports []string, gloo bool, rounds, warmup int) {
	fmt.Printf("\nallreduce (sum) of float32 tensors between processes over 127.0.0.1; %d CPUs, load average %s\n", runtime.NumCPU(), loadAverage())
	fmt.Printf("bus bandwidth = 2(n-1)/n x bytes / time; time = median of the timed iterations of %d alternating rounds\n", rounds)
	fmt.Printf("(each iteration: barrier, then the slowest rank's allreduce time; %d warm-up iterations per size and round)\n", warmup)
	if len(transports) > 0 {
		fmt.Printf("ucx_perftest: tag_bw, one process to another, median of %d rounds' overall bandwidth (its MB/s are MiB/s, converted)\n", rounds)
	}
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "ranks\tsize\t"
	for _, l := range links {
		head += l.name + " GB/s\t"
	}
	for _, tls := range transports {
		head += "perftest " + tls + " GB/s\t"
	}
	if gloo {
		head += "gloo GB/s\t"
	}
	ratios := ratioColumns(links, transports, gloo)
	for _, r := range ratios {
		head += r.title + "\t"
	}
	fmt.Fprintln(tw, head)
	for _, n := range worlds {
		for _, s := range plan {
			bw := map[string]float64{}
			line := fmt.Sprintf("%d\t%s\t", n, sizeName(s.Bytes))
			cell := func(name string, v float64) {
				bw[name] = v
				if v == 0 {
					line += "-\t"
				} else {
					line += fmt.Sprintf("%.3f\t", v)
				}
			}
			for _, l := range links {
				if ts := m.times[key{l.name, n, s.Bytes}]; len(ts) > 0 {
					cell(l.name, busBW(n, s.Bytes, median(ts)))
				} else {
					cell(l.name, 0)
				}
			}
			for _, tls := range transports {
				cell("perftest-"+tls, median(m.perfBW[key{"perftest-" + tls, 0, s.Bytes}]))
			}
			if gloo {
				if ts := m.times[key{"gloo", n, s.Bytes}]; len(ts) > 0 {
					cell("gloo", busBW(n, s.Bytes, median(ts)))
				} else {
					cell("gloo", 0)
				}
			}
			for _, r := range ratios {
				if a, b := bw[r.num], bw[r.den]; a > 0 && b > 0 {
					line += fmt.Sprintf("%.2fx\t", a/b)
				} else {
					line += "-\t"
				}
			}
			fmt.Fprintln(tw, line)
		}
	}
	tw.Flush()
	if gloo && m.glooNote != "" {
		fmt.Printf("\ngloo skipped: %s\n", m.glooNote)
	}
	if m.perfNote != "" {
		fmt.Printf("\nucx_perftest skipped: %s\n", m.perfNote)
	}
}

// ratio is a column of the table: one bandwidth over another.
type ratio struct {
	title, num, den string
}

// ratioColumns are the comparisons the measured links allow: Spindle over
// gloo on TCP, each UCX link over ucx_perftest on its transport, and UCX
// over shared memory against the TCP link.
func ratioColumns(links []link, transports []string, gloo bool) []ratio {
	has := func(name string) bool {
		return slices.ContainsFunc(links, func(l link) bool { return l.name == name })
	}
	var out []ratio
	for _, l := range []string{"tcp", "tcp-sockets"} {
		if gloo && has(l) {
			out = append(out, ratio{l + "/gloo", l, "gloo"})
		}
	}
	for _, tls := range transports {
		if has("ucx-" + tls) {
			out = append(out, ratio{"ucx-" + tls + "/perftest", "ucx-" + tls, "perftest-" + tls})
		}
	}
	if has("ucx-sm") && has("tcp") {
		out = append(out, ratio{"ucx-sm/tcp", "ucx-sm", "tcp"})
	}
	if has("ucx") && has("tcp") {
		out = append(out, ratio{"ucx/tcp", "ucx", "tcp"})
	}
	if has("ucx-tcp") && has("tcp") {
		out = append(out, ratio{"ucx-tcp/tcp", "ucx-tcp", "tcp"})
	}
	for _, u := range []string{"ucx-sm", "ucx-tcp"} {
		if has(u) && has("tcp-sockets") {
			out = append(out, ratio{u + "/tcp-sockets", u, "tcp-sockets"})
		}
	}
	return out
}

func busBW(world, nbytes int, secs float64) float64 {
	return 2 * float64(world-1) / float64(world) * float64(nbytes) / secs / 1e9
}

// runSpindle starts n worker processes joined like training processes
// under an executor and returns rank 0's report.
func runSpindle(ctx context.Context, n int, plan []step, warmup, chunk, sockBuf int, l link) (result, error) {
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
			collective.EnvLink+"="+l.spec,
		)
		if l.tls != "" {
			cmd.Env = append(cmd.Env, "UCX_TLS="+l.tls)
		}
		if l.sockets {
			cmd.Env = append(cmd.Env, envSockets+"=1")
		}
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
	// UCX prints its own messages on stdout: the report is the last line.
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	var res result
	if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil {
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
	// Only warnings: each rank's "data link is ..." would fill the output.
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if v, _ := strconv.Atoi(os.Getenv(envChunk)); v != 0 {
		cfg.ChunkBytes = v
	}
	if v, _ := strconv.Atoi(os.Getenv(envSockBuf)); v != 0 {
		cfg.SocketBufferBytes = v
	}
	if os.Getenv(envSockets) != "" {
		cfg.NoSharedMemory = true
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

// parseSizes parses tensor sizes: plain numbers are MiB; k and m suffixes
// say KiB and MiB.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		unit := 1 << 20
		if v, ok := strings.CutSuffix(f, "k"); ok {
			f, unit = v, 1<<10
		} else if v, ok := strings.CutSuffix(f, "m"); ok {
			f = v
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 || v*unit%4 != 0 {
			return nil, fmt.Errorf("%q: want sizes like 4k, 1m or 64 (MiB)", s)
		}
		out = append(out, v*unit)
	}
	return out, nil
}

// sizeName prints a size in KiB or MiB.
func sizeName(b int) string {
	if b >= 1<<20 && b%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%d KiB", b>>10)
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
