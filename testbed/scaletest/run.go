package scaletest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// Options shape one scale run.
type Options struct {
	// Ranks is the job's world size.
	Ranks int
	// Heartbeat is spindle.executor.heartbeatInterval (0: the default).
	Heartbeat time.Duration
	// Steady is how long the driver's CPU is measured once every rank
	// heartbeats.
	Steady time.Duration
	// StartLatency and StartSpread shape the containers' start (ManagerConfig).
	StartLatency, StartSpread time.Duration
	// Dir holds the job's event log.
	Dir string
	// Chromium, when set, is the headless browser that renders the job page.
	Chromium string
	// HeapProfile, when set, is where the driver process's heap profile
	// is written after the steady window.
	HeapProfile string
	// Logger gets the driver's logs (nil: none).
	Logger *slog.Logger
}

// Result is what one scale run measured.
type Result struct {
	Ranks int
	// SubmitToRegistered is from the driver's start to the last rank's
	// registration answered; StartToRegistered from the last container's
	// start to the same moment.
	SubmitToRegistered, StartToRegistered time.Duration
	// FirstToLastRegistered is from the first rank's registration
	// answered to the last's: the driver handing out the cluster spec.
	FirstToLastRegistered time.Duration
	// HeartbeatCPU is the driver process's CPU time per heartbeat in the
	// steady window; DriverCores its CPU time over the window's length.
	HeartbeatCPU time.Duration
	DriverCores  float64
	// RegisterCPU is the driver process's CPU time from its start to
	// every rank registered; SwarmRegisterCPU the swarm's meanwhile, and
	// SwarmCores the swarm's share of cores in the steady window: the
	// simulation's own cost, on the machine the driver shares with it.
	RegisterCPU, SwarmRegisterCPU time.Duration
	SwarmCores                    float64
	// RSSBytes is the driver process's resident size after the steady
	// window.
	RSSBytes int64
	// Probes of the driver's web UI while the job runs.
	Metrics, Status, Page Probe
	// PageRender is headless Chromium's time to load and render the job
	// page, less its time for an empty page (0: not measured).
	PageRender time.Duration
	// EventLogBytes is the size of the job's event log; EventLogPerRankMin
	// that over ranks and the job's minutes.
	EventLogBytes      int64
	EventLogPerRankMin float64
	// History is spindle history's answer for the job list and the job.
	HistoryList, HistoryJob Probe
	// PeersEnvBytes is the size of a rank's SPINDLE_PEERS.
	PeersEnvBytes int
}

// Probe is one timed HTTP request.
type Probe struct {
	Bytes int
	Time  time.Duration
}

// Run runs one job of opts.Ranks simulated executors to its end against a
// real driver in this process and measures it.
func Run(ctx context.Context, opts Options) (*Result, error) {
	cfg := driver.DefaultConfig()
	if opts.Heartbeat > 0 {
		cfg.HeartbeatInterval = opts.Heartbeat
	}
	if opts.Steady <= 0 {
		opts.Steady = 5 * cfg.HeartbeatInterval
	}
	m, err := NewManager(ManagerConfig{StartLatency: opts.StartLatency, StartSpread: opts.StartSpread, Heartbeat: cfg.HeartbeatInterval, Seed: 1})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	cfg.AppName = fmt.Sprintf("scale-%d", opts.Ranks)
	cfg.NumExecutors = opts.Ranks
	cfg.Command = []string{"python3", "train.py"}
	cfg.ListenHost = "127.0.0.1"
	cfg.UIEnabled, cfg.UIPort = true, 0
	cfg.EventLogDir = opts.Dir
	cfg.RegistrationTimeout = 10 * time.Minute
	cfg.HeartbeatTimeout = max(cfg.HeartbeatTimeout, time.Minute)
	cfg.Console = nil
	cfg.Logger = opts.Logger
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var ui uiURL
	cfg.OnEvent = func(ev jobview.Event) {
		if ev.Kind == jobview.KindWebUI {
			ui.set(ev.Message)
		}
	}
	d, err := driver.New(cfg, m)
	if err != nil {
		return nil, fmt.Errorf("scaletest: new driver: %w", err)
	}
	defer d.Close()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start, cpuStart := time.Now(), processCPU()
	var runErr error
	ended := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { runErr = d.Run(runCtx); close(ended) })
	res := &Result{Ranks: opts.Ranks}
	if err := measureRunning(ctx, m, opts, cfg.HeartbeatInterval, start, cpuStart, d.JobID(), &ui, res, ended); err != nil {
		cancel()
		<-ended
		if runErr != nil {
			err = fmt.Errorf("%w (the job: %v)", err, runErr)
		}
		return nil, err
	}
	if err := m.Finish(); err != nil {
		return nil, err
	}
	<-ended
	if runErr != nil {
		return nil, fmt.Errorf("scaletest: the %d-rank job: %w (%s)", opts.Ranks, runErr, strings.Join(m.Timings().Failures, "; "))
	}
	return res, measureAfter(ctx, opts, d.JobID(), time.Since(start), res)
}

// measureRunning waits for every rank to register, then measures the
// driver in its steady state and probes its web UI.
func measureRunning(ctx context.Context, m *Manager, opts Options, hb time.Duration, start time.Time, cpuStart time.Duration, jobID string,
	ui *uiURL, res *Result, ended <-chan struct{}) error {
	// A job that ends before every rank registered ends the wait.
	regCtx, cancel := context.WithCancel(ctx)
	var watcher sync.WaitGroup
	defer watcher.Wait()
	defer cancel()
	watcher.Go(func() {
		select {
		case <-ended:
			cancel()
		case <-regCtx.Done():
		}
	})
	if err := m.WaitRegistered(regCtx, opts.Ranks); err != nil {
		return fmt.Errorf("scaletest: wait for %d ranks to register (%d did): %w", opts.Ranks, m.Timings().Registered, err)
	}
	t := m.Timings()
	res.SubmitToRegistered = t.LastRegistered.Sub(start)
	res.RegisterCPU = processCPU() - cpuStart
	res.SwarmRegisterCPU = m.SwarmCPU()
	res.StartToRegistered = t.LastRegistered.Sub(t.LastStart)
	res.FirstToLastRegistered = t.LastRegistered.Sub(t.FirstRegistered)
	res.PeersEnvBytes = t.PeersEnvBytes
	// One heartbeat round to settle, then the steady window.
	if err := sleep(ctx, 2*hb); err != nil {
		return err
	}
	cpu0, swarm0, at0 := processCPU(), m.SwarmCPU(), time.Now()
	if err := sleep(ctx, opts.Steady); err != nil {
		return err
	}
	cpu, window := processCPU()-cpu0, time.Since(at0)
	res.SwarmCores = (m.SwarmCPU() - swarm0).Seconds() / window.Seconds()
	beats := float64(opts.Ranks) * window.Seconds() / hb.Seconds()
	res.HeartbeatCPU = time.Duration(float64(cpu) / beats)
	res.DriverCores = cpu.Seconds() / window.Seconds()
	res.RSSBytes = residentBytes()
	if opts.HeapProfile != "" {
		if err := writeHeapProfile(opts.HeapProfile); err != nil {
			return err
		}
	}
	return probeUI(ctx, opts, ui.get(), jobID, res)
}

// probeUI times the running job's answers from its web UI at base.
func probeUI(ctx context.Context, opts Options, base, jobID string, res *Result) error {
	if base == "" {
		return errors.New("scaletest: the driver published no web UI address")
	}
	var err error
	base = strings.TrimSuffix(base, "/")
	if res.Metrics, err = median(probeRuns, func() (Probe, error) { return probe(ctx, base+"/metrics") }); err != nil {
		return err
	}
	if res.Status, err = median(probeRuns, func() (Probe, error) { return probe(ctx, base+"/api/jobs/"+jobID) }); err != nil {
		return err
	}
	if res.Page, err = probe(ctx, base+"/jobs/"+jobID); err != nil {
		return err
	}
	if opts.Chromium != "" {
		render, err := median(renderRuns, func() (Probe, error) {
			d, err := renderTime(ctx, opts.Chromium, base, jobID, opts.Ranks)
			return Probe{Time: d}, err
		})
		res.PageRender = render.Time
		if err != nil {
			return err
		}
	}
	return nil
}

// measureAfter measures the finished job's event log and its history page.
func measureAfter(ctx context.Context, opts Options, jobID string, ran time.Duration, res *Result) error {
	var total int64
	err := filepath.WalkDir(opts.Dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err == nil {
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("scaletest: size the event log in %s: %w", opts.Dir, err)
	}
	res.EventLogBytes = total
	res.EventLogPerRankMin = float64(total) / float64(opts.Ranks) / ran.Minutes()
	res.HistoryList, res.HistoryJob, err = probeHistory(ctx, opts.Dir, jobID)
	return err
}

// Each answer is timed several times and its median kept: on a machine
// shared with other work one request can wait on the scheduler for longer
// than the driver takes to answer it.
const (
	probeRuns  = 5
	renderRuns = 3
)

// median runs f n times and returns the run of median time.
func median(n int, f func() (Probe, error)) (Probe, error) {
	runs := make([]Probe, 0, n)
	for range n {
		p, err := f()
		if err != nil {
			return p, err
		}
		runs = append(runs, p)
	}
	slices.SortFunc(runs, func(a, b Probe) int { return cmp.Compare(a.Time, b.Time) })
	return runs[n/2], nil
}

// uiURL is the web UI's address once the driver published it.
type uiURL struct {
	mu  sync.Mutex
	url string
}

func (u *uiURL) set(s string) { u.mu.Lock(); u.url = s; u.mu.Unlock() }
func (u *uiURL) get() string  { u.mu.Lock(); defer u.mu.Unlock(); return u.url }

// sleep waits d or until ctx ends: the harness measures over wall-clock
// windows, it does not synchronise by them.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeHeapProfile writes this process's heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("scaletest: heap profile: %w", err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("scaletest: write heap profile %s: %w", path, err)
	}
	return f.Close()
}
