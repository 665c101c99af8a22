package worker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/internal/secretfd"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
)

// Environment variables the worker sets on executors.
const (
	EnvWorkerID    = "SPINDLE_WORKER_ID"
	EnvAppID       = "SPINDLE_APP_ID"
	EnvExecutorDir = "SPINDLE_EXECUTOR_DIR"
	envCUDADevices = "CUDA_VISIBLE_DEVICES"
)

// stderrTailBytes bounds the stderr quoted in an exit message.
const stderrTailBytes = 2048

// proc is one executor process.
type proc struct {
	app, id  string
	launchID string // the placement it runs (LaunchRequest.launch_id)
	dir      string
	cgroup   string
	logs     []*rotatingLog // stdout, stderr
	cmd      *exec.Cmd
	pid      int
	started  time.Time
	done     chan struct{} // closed when the process was reaped

	// Set under the worker's lock.
	stopReason string
	exitCode   int
	message    string
	exited     bool
}

// launchSpec is what a Launch call asks for.
type launchSpec struct {
	app, id  string
	launchID string
	args     []string
	env      map[string]string
	cores    int
	memoryMB int64
	gpus     []int
}

// start starts an executor process. The caller holds no lock: starting
// touches the file system and forks.
func (w *Worker) start(s launchSpec) (*proc, error) {
	dir := filepath.Join(w.cfg.WorkDir, s.app, s.id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create executor directory: %w", err)
	}
	// The worker copies the executor's output into files it rotates
	// (logrotate.go), so a process that prints for days cannot fill the
	// disk.
	stdout, err := openRotatingLog(dir, "stdout", w.cfg.LogMaxBytes, w.cfg.LogMaxFiles)
	if err != nil {
		return nil, err
	}
	stderr, err := openRotatingLog(dir, "stderr", w.cfg.LogMaxBytes, w.cfg.LogMaxFiles)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			stdout.Close()
			stderr.Close()
		}
	}()

	cmd := exec.Command(w.cfg.Binary, s.args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Training processes the executor leaves behind hold its output
	// pipes: Wait does not wait for them past this.
	cmd.WaitDelay = w.cfg.OutputWaitDelay
	cmd.Env = w.executorEnv(s, dir)
	// The job's secrets go through a pipe: the executor's environment
	// is readable by its training processes (/proc/PPID/environ).
	secrets, _ := secretfd.Split(s.env)
	release, err := secretfd.Attach(cmd, secrets)
	if err != nil {
		return nil, err
	}
	defer release()
	// Its own process group, so stopping it stops the training processes it
	// started; killed with the worker, so no executor outlives it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	p := &proc{app: s.app, id: s.id, launchID: s.launchID, dir: dir, cmd: cmd, done: make(chan struct{}), logs: []*rotatingLog{stdout, stderr}}
	var cgFD *os.File
	if w.cgroups != nil {
		cg, err := w.cgroups.create(s.app+"."+s.id, s.cores, s.memoryMB)
		if err != nil {
			return nil, err
		}
		p.cgroup = cg
		if cgFD, err = os.Open(cg); err == nil {
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = int(cgFD.Fd())
		}
	}
	err = cmd.Start()
	if err != nil && cgFD != nil {
		// Starting straight into the cgroup (clone3) is not supported
		// everywhere: start normally and move the process in.
		cmd.SysProcAttr.UseCgroupFD = false
		cmd = rebuild(cmd)
		p.cmd = cmd
		if err = cmd.Start(); err == nil {
			if aerr := addProcess(p.cgroup, cmd.Process.Pid); aerr != nil {
				w.logger.Warn("executor runs without cgroup limits", "app", s.app, "executor", s.id, "err", aerr)
			}
		}
	}
	if cgFD != nil {
		_ = cgFD.Close()
	}
	if err != nil {
		if p.cgroup != "" {
			_ = removeCgroup(p.cgroup)
		}
		return nil, fmt.Errorf("start %s: %w", w.cfg.Binary, err)
	}
	p.pid = cmd.Process.Pid
	p.started = time.Now()
	started = true
	return p, nil
}

// rebuild copies a command that failed to start, since exec.Cmd cannot be
// started twice.
func rebuild(c *exec.Cmd) *exec.Cmd {
	n := exec.Command(c.Path, c.Args[1:]...)
	n.Dir, n.Env, n.Stdout, n.Stderr, n.ExtraFiles = c.Dir, c.Env, c.Stdout, c.Stderr, c.ExtraFiles
	attr := *c.SysProcAttr
	n.SysProcAttr = &attr
	return n
}

// executorEnv is the worker's environment without its own secrets, plus
// the driver's variables but the job's secrets (which travel through a
// pipe), the GPUs and where the executor is.
func (w *Worker) executorEnv(s launchSpec, dir string) []string {
	drop := map[string]bool{secure.EnvSecret: true}
	for k := range s.env {
		drop[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || (w.cfg.GPUs > 0 && k == envCUDADevices) {
			continue
		}
		env = append(env, kv)
	}
	_, plain := secretfd.Split(s.env)
	for k, v := range plain {
		env = append(env, k+"="+v)
	}
	env = append(env, EnvWorkerID+"="+w.id, EnvAppID+"="+s.app, EnvExecutorDir+"="+dir)
	if w.cfg.GPUs > 0 {
		ids := make([]string, len(s.gpus))
		for i, g := range s.gpus {
			ids[i] = strconv.Itoa(g)
		}
		// Empty hides every GPU from an executor that was given none.
		env = append(env, envCUDADevices+"="+strings.Join(ids, ","))
	}
	return env
}

// reap waits for p to end, records how, and clears up after it.
func (w *Worker) reap(p *proc) {
	err := p.cmd.Wait()
	// Whatever the executor left in its process group goes with it.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	for _, l := range p.logs {
		_ = l.Close()
	}
	code, how := exitStatus(p.cmd.ProcessState, err)
	tail := ""
	if code != 0 {
		tail = stderrTail(filepath.Join(p.dir, "stderr"))
	}
	if p.cgroup != "" {
		if err := removeCgroup(p.cgroup); err != nil {
			w.logger.Warn("remove executor cgroup", "app", p.app, "executor", p.id, "err", err)
		}
	}
	w.mu.Lock()
	msg := fmt.Sprintf("on worker %s (host %s): %s", w.id, w.host, how)
	if p.stopReason != "" {
		msg += "; stopped because " + p.stopReason
	}
	if tail != "" {
		msg += "; last lines of its stderr:\n" + tail
	}
	p.exitCode, p.message, p.exited = code, msg, true
	w.mu.Unlock()
	close(p.done)
	w.logger.Info("executor exited", "app", p.app, "executor", p.id, "pid", p.pid, "exit_code", code, "how", how,
		"ran", time.Since(p.started).Round(time.Millisecond))
	w.kickHeartbeat()
}

// exitStatus turns a wait result into an exit code (-1 for a signal) and
// a description.
func exitStatus(ps *os.ProcessState, err error) (int, string) {
	if ps == nil {
		return -1, fmt.Sprintf("wait failed: %v", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, "killed by signal " + ws.Signal().String()
	}
	return ps.ExitCode(), fmt.Sprintf("process exited with status %d", ps.ExitCode())
}

// stderrTail returns the last lines of a file, at most stderrTailBytes.
func stderrTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-stderrTailBytes, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return ""
	}
	s := strings.TrimRight(string(b), "\n")
	if off > 0 {
		if _, rest, ok := strings.Cut(s, "\n"); ok {
			s = rest
		}
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

// signal sends sig to p's process group.
func (p *proc) signal(sig syscall.Signal) error {
	if p.pid <= 0 {
		return nil // not started: a signal to -0 would hit the worker's own group
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal executor %s (pid %d): %w", p.id, p.pid, err)
	}
	return nil
}

// StopReasonFile is written into an executor's directory before the
// worker stops it, saying why (executor.StopReasonFile).
const StopReasonFile = ".spindle-stop-reason"
