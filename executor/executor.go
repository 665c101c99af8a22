package executor

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/liveness"
	"github.com/spindle-ml/spindle/internal/rpc"
)

// EnvJobSecret names the per-job secret among the secrets handed to an
// executor (through an inherited pipe, never its environment). It never
// reaches the training process.
const EnvJobSecret = envcontract.JobSecret

// ErrTrainingFailed is returned by Run when the training process ended
// unsuccessfully.
var ErrTrainingFailed = errors.New("executor: training process failed")

// ErrStopped is returned by Run when the executor stopped the training
// process itself: the driver said stop (another rank failed, the job was
// interrupted) or the executor was told to end. It is not a failure of
// the process, and the driver, which decided it, reports the job's end.
var ErrStopped = errors.New("executor: training process stopped")

// Config configures an executor.
type Config struct {
	// DriverAddr is the driver's control-plane address (host:port).
	DriverAddr string
	// ID is the executor's id within the job, given by the driver.
	ID string
	// JobID names the job (for logs and the work directory).
	JobID string
	// Secret is the per-job secret calls are signed with.
	Secret string
	// TLS, when set (spindle.job.tls.enabled), is how the executor
	// reaches the driver, its control plane and its push endpoint: it
	// presents the job's client certificate and accepts only the job's
	// driver. Nil: plain text.
	TLS *tls.Config
	// WorkDir holds the feed socket and localized files; empty means a
	// fresh temporary directory, removed at exit.
	WorkDir string
	// Interface picks the published address (spindle.network.interface).
	Interface string
	// ArchiveCache is the directory --archives are unpacked in, once per
	// host and content; empty: the YARN application's local directory,
	// else one per user in the system's temporary directory.
	ArchiveCache string
	// ArchiveLimits bound what one archive may unpack
	// (spindle.archives.maxBytes, spindle.archives.maxEntries).
	ArchiveLimits ArchiveLimits
	// RegisterTimeout bounds registration (the whole gang must arrive;
	// zero: DefaultRegisterTimeout).
	RegisterTimeout time.Duration
	// ReportTimeout bounds the report of the rank's exit to the driver,
	// made even as the executor is told to stop (zero:
	// DefaultReportTimeout).
	ReportTimeout time.Duration
	// PSLeaveTimeout bounds leaving the parameter servers for a training
	// process that ended well without leaving them (zero:
	// DefaultPSLeaveTimeout).
	PSLeaveTimeout time.Duration
	// GPUSampleTimeout bounds one run of nvidia-smi sampling the rank's
	// GPUs (zero: DefaultGPUSampleTimeout).
	GPUSampleTimeout time.Duration
	// Stdout and Stderr receive the training process's output, prefixed
	// with its rank.
	Stdout, Stderr io.Writer
	Logger         *slog.Logger
}

// Defaults of Config's timeouts, applied by New to zero fields.
const (
	DefaultRegisterTimeout  = 5 * time.Minute
	DefaultReportTimeout    = 5 * time.Second
	DefaultPSLeaveTimeout   = 10 * time.Second
	DefaultGPUSampleTimeout = 5 * time.Second
)

// withDefaults returns c with zero timeouts replaced by their defaults.
func (c Config) withDefaults() Config {
	c.RegisterTimeout = cmp.Or(c.RegisterTimeout, DefaultRegisterTimeout)
	c.ReportTimeout = cmp.Or(c.ReportTimeout, DefaultReportTimeout)
	c.PSLeaveTimeout = cmp.Or(c.PSLeaveTimeout, DefaultPSLeaveTimeout)
	c.GPUSampleTimeout = cmp.Or(c.GPUSampleTimeout, DefaultGPUSampleTimeout)
	return c
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.DriverAddr == "":
		return errors.New("executor: no driver address (--driver)")
	case c.ID == "":
		return errors.New("executor: no executor id (--id)")
	case c.Secret == "":
		return fmt.Errorf("executor: no job secret (%s) handed over: executors are started by a cluster manager", EnvJobSecret)
	}
	return nil
}

// Executor runs one rank.
type Executor struct {
	cfg    Config
	logger *slog.Logger
	signer *auth.Signer
	conn   *grpc.ClientConn
	client driverpb.ControlClient
	// rdmaReport holds the rank's RDMA line for the heartbeats (a string).
	rdmaReport atomic.Value
	// credGen is the generation of the Hadoop credentials the executor
	// put in its credentials file (0: those it started with).
	credGen atomic.Int64
}

// New returns an executor; it connects lazily, so New does no I/O.
func New(cfg Config) (*Executor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	cfg = cfg.withDefaults()
	signer, err := auth.NewSigner(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("executor: job secret: %w", err)
	}
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	conn, err := rpc.NewClient(cfg.DriverAddr, rpc.ClientConfig{Options: append(signer.DialOptions(), grpc.WithTransportCredentials(creds))})
	if err != nil {
		return nil, fmt.Errorf("executor: connect to driver %s: %w", cfg.DriverAddr, err)
	}
	return &Executor{
		cfg:    cfg,
		logger: cfg.Logger.With("component", "executor", "executor", cfg.ID),
		signer: signer,
		conn:   conn,
		client: driverpb.NewControlClient(conn),
	}, nil
}

// Close releases the driver connection.
func (e *Executor) Close() error { return e.conn.Close() }

// Run registers, runs the training process with its feed, and reports how
// it ended. It returns nil only when the process exited 0.
func (e *Executor) Run(ctx context.Context) error {
	host, ifname, err := chooseHost(e.cfg.Interface, e.cfg.DriverAddr)
	if err != nil {
		return err
	}
	ports, err := reservePorts(host)
	if err != nil {
		return err
	}
	defer ports.close()

	regCtx, cancel := context.WithTimeout(ctx, e.cfg.RegisterTimeout)
	resp, err := e.client.Register(regCtx, &driverpb.RegisterRequest{
		ExecutorId: e.cfg.ID, Host: host, Ports: ports.ports(), Pid: int32(os.Getpid()),
	}, grpc.WaitForReady(true))
	cancel()
	if err != nil {
		return fmt.Errorf("register with driver %s: %w", e.cfg.DriverAddr, err)
	}
	task := resp.GetTask()
	if task == nil || len(task.GetCommand()) == 0 {
		return fmt.Errorf("driver %s sent no task to run", e.cfg.DriverAddr)
	}
	if task.Feed == nil {
		task.Feed = &FeedTask{} // a role that gets no input
	}
	id := identity{
		rank: int(resp.GetRank()), worldSize: int(resp.GetWorldSize()),
		localRank: int(resp.GetLocalRank()), localWorldSize: int(resp.GetLocalWorldSize()),
		peers: resp.GetPeers(), host: host, ifname: ifname, membership: resp.GetMembership(),
	}
	if len(id.peers) != id.worldSize || id.worldSize == 0 {
		return fmt.Errorf("driver published %d peers for a world of %d", len(id.peers), id.worldSize)
	}
	e.logger = e.logger.With("rank", id.rank)
	e.logger.Debug("registered", "world_size", id.worldSize, "host", host)
	// Before the task touches HDFS.
	e.takeCredentials(resp.GetCredentials())

	status, runErr := e.runTask(ctx, task, id, ports)
	if why := stopReason(); why != "" && (runErr != nil || !status.exit.ok()) {
		// Stopped by whoever started it (a worker shutting down): that,
		// not the signal, is what the driver should report.
		runErr = fmt.Errorf("%w: rank %d: stopped by its worker: %s", ErrStopped, id.rank, why)
	}
	report := &driverpb.ExitReport{
		ExecutorId: e.cfg.ID, Rank: int32(id.rank), ExitCode: int32(status.exit.code),
		Signal: status.exit.signal, StderrTail: status.stderrTail, Progress: status.progress,
		Rdma: e.rdmaLine(),
	}
	status.obs.takeExit(report, status.usage)
	if runErr != nil {
		report.Error = runErr.Error()
		if _, itself := errors.AsType[*stoppedItselfError](runErr); itself {
			// Not a stop from outside for the driver to wait on the
			// cluster manager's reason for: the error is the reason.
			report.Signal = ""
		}
		var se *setupError
		report.SetupError = errors.As(runErr, &se) && ctx.Err() == nil
		if ctx.Err() != nil && report.Signal == "" {
			// This process was told to stop (SIGTERM: a NodeManager taking
			// its container back) before its training process ran: say
			// so, so that the driver waits for the cluster manager's
			// reason rather than blaming what the stop cut short.
			report.Signal = "SIGTERM"
		}
	}
	// Report even when ctx is done: the driver wants to know why we ended.
	repCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.ReportTimeout)
	if _, err := e.client.ReportExit(repCtx, report); err != nil {
		e.logger.Warn("could not report exit to the driver", "err", err)
	}
	cancel()
	switch {
	case runErr != nil:
		return runErr
	case status.finished:
		// Stopped because the job ended (a parameter server, a worker the
		// chief left behind): the expected end.
		e.logger.Debug("training process stopped at the job's end", "status", status.exit.String())
		return nil
	case status.stopped != "":
		return fmt.Errorf("%w: rank %d: %s", ErrStopped, id.rank, status.stopped)
	case !status.exit.ok():
		return fmt.Errorf("%w: rank %d: %s", ErrTrainingFailed, id.rank, status.exit)
	}
	return nil
}

// taskResult is how a task ended.
type taskResult struct {
	exit       exitStatus
	stderrTail string
	progress   *driverpb.Progress
	// finished says the driver stopped the process because the job ended
	// successfully.
	finished bool
	// stopped says why the executor stopped the process, when it did.
	stopped string
	// obs holds what the last heartbeat did not carry; usage is the
	// ended process's CPU time and peak memory.
	obs   *observations
	usage *driverpb.Usage
}

// runTask prepares the work directory and the task's hooks, starts the
// training process and watches it, the hooks and the driver until the
// process ends.
func (e *Executor) runTask(ctx context.Context, t *Task, id identity, ports *reservedPorts) (taskResult, error) {
	res := taskResult{exit: exitStatus{code: -1}}
	workDir, sockDir, cleanup, err := e.taskDirs(t, id)
	if err != nil {
		return res, err
	}
	defer cleanup()
	r := &taskRun{t: t, id: id, workDir: workDir, sockDir: sockDir, filesDir: filepath.Join(workDir, "files")}
	defer func() {
		if r.resolver != nil {
			r.resolver.Close()
		}
	}()
	stop, err := e.whileLocalizing(ctx, t, id, func(ctx context.Context) error { return e.localize(ctx, r) })
	if err != nil {
		return res, err
	}
	if stop != nil {
		res.stopped, res.finished = stop.why, stop.finished
		return res, nil
	}
	hooks, err := prepareHooks(ctx, e.services(t, id), r)
	defer e.closeHooks(hooks)
	if err != nil {
		return res, err
	}
	res.obs = r.obs
	proc, err := e.startTraining(r, ports)
	if err != nil {
		return res, err
	}
	for _, h := range hooks {
		if w, ok := h.(processWatcher); ok {
			w.Started(proc.cmd.Process.Pid)
		}
	}
	e.logger.Debug("training process started", "pid", proc.cmd.Process.Pid, "command", t.Command[0])
	return e.superviseTask(ctx, r, proc, hooks, res)
}

// taskDirs returns the directories the task keeps its files (work) and
// its Unix sockets in, and what removes those made for this task only.
//
// An executor with a directory of its own (a standalone worker's, a YARN
// container's) keeps its files, localized archives and the feed's spill
// there, on the disks its manager gave it and cleans up even after a
// crash. The sockets go there too unless their paths would pass the
// kernel's limit (YARN's container directories are deep); then they go
// into a short temporary directory that holds nothing else, so a killed
// executor leaves only empty sockets behind in the machine's temporary
// directory.
func (e *Executor) taskDirs(t *Task, id identity) (work, sockets string, cleanup func(), err error) {
	work = e.cfg.WorkDir
	if work == "" && t.Dir == "" {
		work = ownWorkDir()
	}
	if work != "" && socketPathFits(work) {
		return work, work, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "spindle-"+t.JobId+"-"+strconv.Itoa(id.rank)+"-")
	if err != nil {
		return "", "", nil, fmt.Errorf("create the task's socket directory: %w", err)
	}
	if !socketPathFits(tmp) {
		os.RemoveAll(tmp)
		return "", "", nil, fmt.Errorf("the temporary directory %s is too long for Unix socket paths (at most %d bytes with %q): set TMPDIR shorter", tmp, maxSocketPath, longestSocketName)
	}
	if work == "" {
		work = tmp
	}
	return work, tmp, func() { os.RemoveAll(tmp) }, nil
}

// localize fetches what the driver shipped, then the task's files,
// archives and py-files, and leaves r a resolver for the task's file
// systems.
func (e *Executor) localize(ctx context.Context, r *taskRun) error {
	t := r.t
	if err := e.fetchShipped(ctx, t, filepath.Join(r.workDir, "shipped")); err != nil {
		return err
	}
	// After fetchShipped: it places the driver's Hadoop configuration.
	r.resolver = fsys.NewResolver(fsys.Options{HadoopConfDir: t.HadoopConfDir, User: t.HadoopUser})
	if err := localizeFiles(ctx, r.resolver, t.Files, r.filesDir); err != nil {
		return err
	}
	// Archives and py-files are linked into the working directory when it
	// is this executor's own (not the submit directory of a local job).
	ownDir := ""
	if t.Dir == "" {
		ownDir, _ = os.Getwd()
	}
	cache := &archiveCache{root: cmp.Or(e.cfg.ArchiveCache, defaultArchiveCache()), lim: e.cfg.ArchiveLimits}
	var err error
	r.ship, err = prepareShipped(ctx, r.resolver, cache, t, r.filesDir, ownDir)
	return err
}

// startTraining starts the training process with the environment the
// hooks built, handing it the peer port.
func (e *Executor) startTraining(r *taskRun, ports *reservedPorts) (*process, error) {
	t := r.t
	stdout, stderr := e.cfg.Stdout, e.cfg.Stderr
	if t.ForwardOutput {
		stdout, stderr = lineTee{w: stdout, obs: r.obs}, lineTee{w: stderr, obs: r.obs, stderr: true}
	}
	peerFile, err := ports.peer.File()
	if err != nil {
		return nil, fmt.Errorf("hand the peer port to the training process: %w", err)
	}
	defer peerFile.Close()
	// The framework binds the service port itself, beside the executor's
	// hold on it (heldPort), which lasts until the process has exited.
	command := r.ship.command
	if t.BuiltinPs {
		// Spindle's own parameter server: this very binary.
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find this binary to run the built-in parameter server: %w", err)
		}
		command = []string{self, "ps", "serve"}
	}
	proc, err := startProcess(command, t.Dir, r.env, peerFile, outputPrefix(r.id), stdout, stderr, int(t.StderrTailLines))
	if err != nil {
		return nil, err
	}
	// The process holds its own copy now.
	peerFile.Close()
	ports.peer.Close()
	return proc, nil
}

// superviseTask runs the hooks' loops and the heartbeat while the
// training process runs, stops the process when one of them ends first,
// and reports how the task ended.
func (e *Executor) superviseTask(ctx context.Context, r *taskRun, proc *process, hooks []taskHook, res taskResult) (taskResult, error) {
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	g, gctx := errgroup.WithContext(runCtx)
	var feed *feedHook
	// hookErr is the first failure of a hook other than the feed (whose
	// own is feed.err): the checkpoint service, the PS proxy, the GPU
	// sampler. Written before g.Wait returns, read after.
	var hookMu sync.Mutex
	var hookErr error
	for _, h := range hooks {
		f, isFeed := h.(*feedHook)
		if isFeed {
			feed = f
		}
		if run, ok := h.(hookRunner); ok {
			g.Go(func() error {
				err := run.Run(gctx)
				if err != nil && !isFeed && gctx.Err() == nil {
					hookMu.Lock()
					hookErr = cmp.Or(hookErr, err)
					hookMu.Unlock()
				}
				return err
			})
		}
	}
	// stopWhy is why the driver stopped the task (the job's end, or its
	// failure elsewhere); lostErr that the driver stopped answering.
	var stopWhy string
	var lostErr error
	var finished bool
	g.Go(func() error {
		why, fin, err := e.heartbeat(gctx, r.t, r.id, r.feed, r.obs, r.membership)
		if err != nil || why != "" {
			stopWhy, lostErr, finished = why, err, fin
			return fmt.Errorf("stop: %s", cmp.Or(why, errString(err)))
		}
		return nil
	})
	g.Go(func() error {
		_, err := proc.wait(gctx)
		if err == nil {
			return errProcessExited
		}
		return nil
	})
	_ = g.Wait()
	var feedErr error // written by the feed's Run, read after Wait
	if feed != nil {
		feedErr = feed.err
	}
	// ownErr is a failure of this executor that stopped the task: the
	// driver hears it in the exit report, rather than only that the
	// process was sent SIGTERM.
	ownErr := cmp.Or(lostErr, hookErr)
	select {
	case <-proc.done:
	default:
		res.stopped = firstNonEmpty(stopWhy, errString(feedErr), errString(ownErr), "the executor was told to stop")
		e.logger.Info("stopping training process", "reason", res.stopped)
		proc.stop(time.Duration(r.t.StopGraceMillis) * time.Millisecond)
	}
	res.exit = proc.status
	for _, h := range hooks {
		if w, ok := h.(exitWatcher); ok {
			w.Exited(ctx, res.exit)
		}
	}
	res.usage = usageOf(proc.cmd.ProcessState)
	res.stderrTail = proc.tail.String()
	res.progress = progressOf(r.feed)
	res.finished = finished
	if feedErr != nil && res.exit.ok() {
		return res, fmt.Errorf("feed: %w", feedErr)
	}
	if feedErr != nil {
		return res, fmt.Errorf("feed failed (%s): %w", res.exit, feedErr)
	}
	if ownErr != nil && res.stopped != "" && stopWhy == "" {
		return res, &stoppedItselfError{err: ownErr}
	}
	return res, nil
}

var errProcessExited = errors.New("training process exited")

// stoppedItselfError is a failure of the executor (the driver lost, a
// service failed) for which it stopped the training process itself: the
// process's SIGTERM is its doing, not the cluster manager's.
type stoppedItselfError struct{ err error }

func (e *stoppedItselfError) Error() string {
	return "the executor stopped its training process: " + e.err.Error()
}

func (e *stoppedItselfError) Unwrap() error { return e.err }

// heartbeat reports progress until ctx ends. It returns a reason when the
// driver says stop, and whether the stop is the job's successful end; an
// error when the driver cannot be reached for longer than the driver
// timeout.
func (e *Executor) heartbeat(ctx context.Context, t *Task, id identity, server *wire.Server, obs *observations, mh *membershipHook) (string, bool, error) {
	interval := heartbeatInterval(t)
	timeout := driverTimeout(t)
	// A call may take longer than the interval (a loaded driver): cut at
	// the interval, it lost the spans, reports and output it carried.
	callTimeout := max(interval, timeout/3)
	lastOK := time.Now()
	idle := lastOK // when the loop last finished a call
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", false, nil
		case <-tick.C:
		}
		now := time.Now()
		if held := liveness.HeldUp(idle, now, interval); held > 0 {
			// This process was starved or stopped: the driver's silence
			// in that time is not the driver's.
			e.logger.Warn("the executor's heartbeats were held up; the driver's silence in that time is not held against it",
				"held_up", held.Round(time.Millisecond))
			lastOK = liveness.Forgive(lastOK, held, now)
		}
		// Not cancelled with ctx: a heartbeat under way when the process
		// exits carries the last reports, output and spans it took, and
		// is let finish (within callTimeout) rather than lose them.
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		req := &driverpb.HeartbeatRequest{
			ExecutorId: e.cfg.ID, Rank: int32(id.rank), Progress: progressOf(server),
			Rdma: e.rdmaLine(), CredentialsGeneration: e.credGen.Load(), MembershipVersion: mh.current(),
		}
		obs.take(req)
		resp, err := e.client.Heartbeat(callCtx, req)
		cancel()
		idle = time.Now()
		if err == nil {
			e.takeCredentials(resp.GetCredentials())
			if err := mh.update(resp.GetMembership()); err != nil {
				e.logger.Warn("could not hand the training process the new membership", "err", err)
			}
		}
		switch {
		case err == nil && resp.GetStop() && resp.GetFinished():
			return resp.GetReason(), true, nil
		case err == nil && resp.GetStop():
			// The first line: the rest quotes the failed rank's stderr,
			// which the driver prints itself.
			why, _, _ := strings.Cut(resp.GetReason(), "\n")
			return "the driver stopped the job: " + why, false, nil
		case err == nil:
			lastOK = time.Now()
		case ctx.Err() != nil:
			return "", false, nil
		case time.Since(lastOK) > timeout:
			return "", false, fmt.Errorf("lost the driver at %s: no answer for %s (%w)", e.cfg.DriverAddr, time.Since(lastOK).Round(time.Second), err)
		}
	}
}

// heartbeatInterval is how often the executor reports to the driver.
func heartbeatInterval(t *Task) time.Duration {
	if d := time.Duration(t.HeartbeatIntervalMillis) * time.Millisecond; d > 0 {
		return d
	}
	return time.Second
}

func progressOf(s *wire.Server) *driverpb.Progress {
	if s == nil {
		return &driverpb.Progress{}
	}
	st := s.Stats()
	return &driverpb.Progress{Rows: st.Rows, Batches: st.Batches, Epoch: int32(st.Epoch),
		TakenRows: st.TakenRows, TakenBatches: st.TakenBatches, Bytes: st.Bytes}
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
