package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/internal/outlines"
)

// exitStatus is how a training process ended.
type exitStatus struct {
	code   int    // exit status, or -1 when killed by a signal
	signal string // the signal's name, when killed by one
}

func (s exitStatus) ok() bool { return s.code == 0 && s.signal == "" }

func (s exitStatus) String() string {
	if s.signal != "" {
		return "killed by signal " + s.signal
	}
	return fmt.Sprintf("exit status %d", s.code)
}

// process is a running training process.
type process struct {
	cmd    *exec.Cmd
	tail   *lineTail
	done   chan struct{}
	status exitStatus
	copies sync.WaitGroup
}

// startProcess starts argv in its own process group, with the peer
// listener as an inherited descriptor. Its output lines go to stdout and
// stderr with prefix in front; the last tailLines of stderr are kept.
func startProcess(argv []string, dir string, env []string, peer *os.File, prefix string, stdout, stderr io.Writer, tailLines int) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	if peer != nil {
		cmd.ExtraFiles = []*os.File{peer}
	}
	// Its own group, so stopping it reaches its children too; and killed
	// with the executor, so nothing outlives a crashed executor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start training command %q: %w", argv[0], err)
	}
	p := &process{cmd: cmd, tail: newLineTail(tailLines), done: make(chan struct{})}
	p.copies.Add(2)
	go func() { defer p.copies.Done(); prefixLines(outPipe, stdout, prefix, nil) }()
	go func() { defer p.copies.Done(); prefixLines(errPipe, stderr, prefix, p.tail) }()
	go func() {
		p.copies.Wait()
		err := cmd.Wait()
		p.status = statusOf(cmd.ProcessState, err)
		close(p.done)
	}()
	return p, nil
}

func statusOf(ps *os.ProcessState, err error) exitStatus {
	if ps == nil {
		return exitStatus{code: -1, signal: "unknown (" + err.Error() + ")"}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitStatus{code: -1, signal: signalName(ws.Signal())}
	}
	return exitStatus{code: ps.ExitCode()}
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGBUS:
		return "SIGBUS"
	}
	return s.String()
}

// stop asks the process group to end (SIGTERM) and kills it after grace.
func (p *process) stop(grace time.Duration) {
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// wait waits for the process or ctx.
func (p *process) wait(ctx context.Context) (exitStatus, error) {
	select {
	case <-p.done:
		return p.status, nil
	case <-ctx.Done():
		return exitStatus{}, ctx.Err()
	}
}

// maxOutputLine is the longest output line passed on whole; a longer one
// is cut (and the rest still read, so the process never blocks on its
// output). It stays well under the driver's own limit.
const maxOutputLine = 16 * 1024

// prefixLines copies r to w line by line with prefix in front, each line
// in a single Write so lines of different ranks never interleave. A lone
// "\r" ends a line too (progress bars), and over-long lines are cut, so
// r is drained to its end whatever the process writes.
func prefixLines(r io.Reader, w io.Writer, prefix string, tail *lineTail) {
	out := make([]byte, 0, 1024)
	err := outlines.Read(r, maxOutputLine, func(line []byte) {
		out = append(append(append(out[:0], prefix...), line...), '\n')
		_, _ = w.Write(out)
		if tail != nil {
			tail.add(string(line))
		}
	})
	if err != nil && !errors.Is(err, os.ErrClosed) {
		_, _ = io.WriteString(w, prefix+"(output lost: "+err.Error()+")\n")
	}
}

// lineTail keeps the last n lines written to it.
type lineTail struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newLineTail(n int) *lineTail { return &lineTail{n: n} }

func (t *lineTail) add(line string) {
	if t.n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(line) > 1000 {
		line = line[:1000] + "..."
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
