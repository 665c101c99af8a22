// Command scalereport runs the scale harness (package scaletest) at each
// world size asked for and prints a Markdown table of what it measured:
// `make scale` runs it and docs/scale.md keeps its output.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/testbed/scaletest"
)

func main() {
	scaletest.MaybeSwarm()
	ranks := flag.String("ranks", "100,500,1000,2000", "comma-separated world sizes")
	steady := flag.Duration("steady", 10*time.Second, "how long the driver's CPU is measured once every rank heartbeats")
	latency := flag.Duration("start-latency", 500*time.Millisecond, "least container start time")
	spread := flag.Duration("start-spread", time.Second, "containers start up to this much later than the least")
	cpuprofile := flag.String("cpuprofile", "", "write the driver process's CPU profile to this file")
	heap := flag.String("memprofile", "", "write the driver process's heap profile, after the steady window, to this file (a suffix per world size)")
	keep := flag.String("eventlog-dir", "", "keep the jobs' event logs here (default: a temporary directory, removed)")
	browser := flag.String("chromium", "chromium", "headless browser for the job page (empty: none)")
	yarnRuns := flag.Int("yarn-runs", 3, "runs of each world size through the real ApplicationMaster against simulated NodeManagers (0: none); their medians are printed")
	nodeBeat := flag.Duration("yarn-node-heartbeat", 0, "grant containers only on NodeManager heartbeats of this period, as YARN does (0: on each allocate call)")
	perNode := flag.Int("yarn-ranks-per-node", 0, "executor containers each simulated NodeManager holds (0: 8; 1: a NodeManager per rank)")
	driverRuns := flag.Bool("driver", true, "run the driver's table (simulated executors in a swarm process)")
	flag.Parse()
	var sizes []int
	for _, s := range strings.Split(*ranks, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "scalereport: -ranks %q: %q is not a world size\n", *ranks, s)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	if *browser != "" {
		path, err := exec.LookPath(*browser)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scalereport: -chromium %s: not found (give -chromium '' to skip the render)\n", *browser)
			os.Exit(2)
		}
		*browser = path
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scalereport: -cpuprofile:", err)
			os.Exit(2)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "scalereport: -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var results []*scaletest.Result
	for _, n := range sizes {
		if !*driverRuns {
			break
		}
		dir, err := os.MkdirTemp(*keep, "scalereport-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "scalereport:", err)
			os.Exit(1)
		}
		res, err := scaletest.Run(ctx, scaletest.Options{Ranks: n, Steady: *steady, StartLatency: *latency,
			StartSpread: *spread, Dir: dir, Chromium: *browser, HeapProfile: suffixed(*heap, n)})
		if *keep == "" {
			os.RemoveAll(dir)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "scalereport: %d ranks: %v\n", n, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "scalereport: %d ranks done\n", n)
		results = append(results, res)
	}
	if len(results) > 0 {
		writeTable(os.Stdout, results)
	}
	if *yarnRuns > 0 {
		fmt.Println()
		if err := yarnReport(ctx, os.Stdout, sizes, *yarnRuns, scaletest.YARNOptions{RanksPerNode: *perNode, NodeHeartbeat: *nodeBeat}); err != nil {
			fmt.Fprintln(os.Stderr, "scalereport:", err)
			os.Exit(1)
		}
	}
}

// writeTable prints one column per world size.
func writeTable(w io.Writer, rs []*scaletest.Result) {
	row := rower(w, rs)
	row("ranks", func(r *scaletest.Result) string { return strconv.Itoa(r.Ranks) })
	fmt.Fprintln(w, "|"+strings.Repeat(" --- |", len(rs)+1))
	kib := func(n int64) string { return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KiB" }
	row("submit to all registered", func(r *scaletest.Result) string { return ms(r.SubmitToRegistered) })
	row("last container start to all registered", func(r *scaletest.Result) string { return ms(r.StartToRegistered) })
	row("first to last registration answered", func(r *scaletest.Result) string { return ms(r.FirstToLastRegistered) })
	row("driver CPU, submit to all registered", func(r *scaletest.Result) string { return ms(r.RegisterCPU) })
	row("swarm CPU, submit to all registered", func(r *scaletest.Result) string { return ms(r.SwarmRegisterCPU) })
	row("driver CPU per heartbeat", func(r *scaletest.Result) string { return fmt.Sprintf("%d µs", r.HeartbeatCPU.Microseconds()) })
	row("driver cores busy (steady)", func(r *scaletest.Result) string { return fmt.Sprintf("%.3f", r.DriverCores) })
	row("swarm cores busy (steady)", func(r *scaletest.Result) string { return fmt.Sprintf("%.3f", r.SwarmCores) })
	row("driver RSS", func(r *scaletest.Result) string { return fmt.Sprintf("%.0f MiB", float64(r.RSSBytes)/(1<<20)) })
	row("driver RSS per rank", func(r *scaletest.Result) string { return kib(r.RSSBytes / int64(r.Ranks)) })
	row("/metrics size", func(r *scaletest.Result) string { return kib(int64(r.Metrics.Bytes)) })
	row("/metrics time", func(r *scaletest.Result) string { return ms(r.Metrics.Time) })
	row("job page data size (status)", func(r *scaletest.Result) string { return kib(int64(r.Status.Bytes)) })
	row("job page data time (status)", func(r *scaletest.Result) string { return ms(r.Status.Time) })
	row("job page render (Chromium)", func(r *scaletest.Result) string { return ms(r.PageRender) })
	row("event log size", func(r *scaletest.Result) string { return kib(r.EventLogBytes) })
	row("event log per rank-minute", func(r *scaletest.Result) string { return kib(int64(r.EventLogPerRankMin)) })
	row("history: job list", func(r *scaletest.Result) string { return ms(r.HistoryList.Time) })
	row("history: job page data", func(r *scaletest.Result) string { return ms(r.HistoryJob.Time) })
	row("SPINDLE_PEERS size", func(r *scaletest.Result) string { return kib(int64(r.PeersEnvBytes)) })
}

// rower returns a function that prints one table row: its name, then f
// of each result.
func rower[R any](w io.Writer, rs []R) func(name string, f func(R) string) {
	return func(name string, f func(R) string) {
		cells := []string{name}
		for _, r := range rs {
			cells = append(cells, f(r))
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
}

// ms formats d in milliseconds.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
}

// suffixed returns path with the world size added, or "".
func suffixed(path string, n int) string {
	if path == "" {
		return ""
	}
	return fmt.Sprintf("%s.%d", path, n)
}
