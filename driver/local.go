package driver

import (
	"context"
	"errors"
	"fmt"

	"log/slog"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/internal/secretfd"
)

// LocalConfig configures the local cluster manager.
type LocalConfig struct {
	// Binary is the spindle binary that runs executors; empty means this
	// process's own executable.
	Binary string
	// Dir is the executors' working directory; empty means this process's.
	Dir string
	// Console receives the executors' output, line by line; nil means
	// this process's stdout and stderr.
	Console *Console
	// StopGrace is how long Release waits after SIGTERM before SIGKILL.
	StopGrace time.Duration
	Logger    *slog.Logger
	// Slots is how many executors may run at once (the N of local[N]);
	// zero says nothing of room (Room reports none).
	Slots int
}

// Local runs executors as child processes of the driver: the local[N]
// master.
type Local struct {
	cfg    LocalConfig
	logger *slog.Logger
	events chan Event
	closed chan struct{}

	mu    sync.Mutex
	procs map[string]*localProc
	wg    sync.WaitGroup
}

type localProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// What a local cluster manager offers the driver (capabilities.go).
var (
	_ ClusterManager  = (*Local)(nil)
	_ FileSharer      = (*Local)(nil)
	_ OutputDeliverer = (*Local)(nil)
	_ RoomReporter    = (*Local)(nil)
)

// Room says how many more executors fit: the slots local[N] has, less
// the executors still running. An elastic job that went on without a
// lost executor in place may grow back into its slot.
func (l *Local) Room(_ context.Context, _ ExecutorSpec) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	running := 0
	for _, p := range l.procs {
		select {
		case <-p.done:
		default:
			running++
		}
	}
	return max(0, l.cfg.Slots-running), nil
}

// NewLocal returns a local cluster manager.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the spindle binary: %w", err)
		}
		cfg.Binary = exe
	}
	if cfg.Console == nil {
		cfg.Console = NewConsole(os.Stdout, os.Stderr, false)
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Local{
		cfg:    cfg,
		logger: cfg.Logger.With("component", "local-manager"),
		events: make(chan Event, 1024),
		closed: make(chan struct{}),
		procs:  map[string]*localProc{},
	}, nil
}

// Request starts one child process per spec. If any fails to start, the
// ones already started are stopped.
func (l *Local) Request(ctx context.Context, specs []ExecutorSpec) error {
	for i, spec := range specs {
		if err := l.start(spec); err != nil {
			ids := make([]string, i)
			for j := range ids {
				ids[j] = specs[j].ID
			}
			_ = l.Release(ctx, ids)
			return err
		}
	}
	return nil
}

func (l *Local) start(spec ExecutorSpec) error {
	cmd := exec.Command(l.cfg.Binary, spec.Args...)
	cmd.Dir = l.cfg.Dir
	cmd.Env = os.Environ()
	// The job's secrets go through a pipe, as the executor's environment
	// is readable by its training processes (/proc/PPID/environ).
	secrets, plain := secretfd.Split(spec.Env)
	for k, v := range plain {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	release, err := secretfd.Attach(cmd, secrets)
	if err != nil {
		return fmt.Errorf("start executor %s: %w", spec.ID, err)
	}
	defer release()
	// Its own process group: a Ctrl-C on the terminal reaches the driver,
	// which then stops executors in order. A driver that dies without
	// doing so (SIGKILL) sends them SIGTERM, and each stops its training
	// process group as it does for any stop: nothing outlives the submit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start executor %s: %w", spec.ID, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("start executor %s: %w", spec.ID, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start executor %s (%s): %w", spec.ID, l.cfg.Binary, err)
	}
	p := &localProc{cmd: cmd, done: make(chan struct{})}
	l.mu.Lock()
	l.procs[spec.ID] = p
	l.mu.Unlock()
	l.logger.Debug("executor started", "executor", spec.ID, "pid", cmd.Process.Pid)

	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		var copiers sync.WaitGroup
		copiers.Add(2)
		go func() { defer copiers.Done(); l.cfg.Console.copyLines(stdout, false) }()
		go func() { defer copiers.Done(); l.cfg.Console.copyLines(stderr, true) }()
		copiers.Wait()
		err := cmd.Wait()
		close(p.done)
		ev := Event{ExecutorID: spec.ID, Kind: ExecutorExited, Host: "localhost", Time: time.Now()}
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				ev.ExitCode = ee.ExitCode()
				ev.Message = ee.String()
			} else {
				ev.ExitCode = -1
				ev.Message = err.Error()
			}
		}
		select {
		case l.events <- ev:
		case <-l.closed:
		}
	}()
	return nil
}

// Release stops the named executors (all when ids is empty): SIGTERM,
// then SIGKILL to the process group once the grace period or ctx ends.
func (l *Local) Release(ctx context.Context, ids []string) error {
	l.mu.Lock()
	if len(ids) == 0 {
		for id := range l.procs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
	}
	var procs []*localProc
	for _, id := range ids {
		if p, ok := l.procs[id]; ok {
			procs = append(procs, p)
		}
	}
	l.mu.Unlock()

	for _, p := range procs {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	grace := time.NewTimer(l.cfg.StopGrace + time.Second)
	defer grace.Stop()
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		case <-grace.C:
		case <-ctx.Done():
		}
		// Out of patience: kill this one's group, and every later one's.
		for _, q := range procs {
			_ = syscall.Kill(-q.cmd.Process.Pid, syscall.SIGKILL)
		}
		break
	}
	for _, p := range procs {
		<-p.done
	}
	return nil
}

// Events delivers executor exits.
func (l *Local) Events() <-chan Event { return l.events }

// Close stops every executor and waits for their output to drain.
func (l *Local) Close() error {
	err := l.Release(context.Background(), nil)
	close(l.closed)
	l.wg.Wait()
	return err
}
