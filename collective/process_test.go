package collective

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rankProc is one rank running as a child process of the test binary.
type rankProc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	iters  chan struct{} // one value per completed allreduce, best effort
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

// startProcs starts world ranks as real processes joined through the
// executor's contract: an inherited listener on the peer port and the
// SPINDLE_* variables. They allreduce until they fail or are killed.
func startProcs(t *testing.T, world int, timeoutSecs string) []*rankProc {
	t.Helper()
	return startChildren(t, world, timeoutSecs, "allreduce-loop")
}

// startChildren starts world ranks as startProcs does, in child mode
// mode, with the extra environment variables env.
func startChildren(t *testing.T, world int, timeoutSecs, mode string, env ...string) []*rankProc {
	t.Helper()
	peers := make([]string, world)
	for r := range world {
		peers[r] = "127.0.0.1:0"
	}
	return startChildrenAt(t, peers, timeoutSecs, mode, env...)
}

// startChildrenAt is startChildren with rank r listening on peers[r]
// (port 0: any free port).
func startChildrenAt(t *testing.T, peers []string, timeoutSecs, mode string, env ...string) []*rankProc {
	t.Helper()
	world := len(peers)
	lns := make([]*net.TCPListener, world)
	peers = append([]string(nil), peers...)
	for r := range world {
		ln, err := net.Listen("tcp", peers[r])
		if err != nil {
			t.Fatal(err)
		}
		lns[r] = ln.(*net.TCPListener)
		peers[r] = ln.Addr().String()
	}
	procs := make([]*rankProc, world)
	for r := range world {
		f, err := lns[r].File()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.ExtraFiles = []*os.File{f}
		cmd.Env = append(os.Environ(),
			childEnv+"="+mode,
			EnvRank+"="+strconv.Itoa(r),
			EnvWorldSize+"="+strconv.Itoa(world),
			EnvPeers+"="+strings.Join(peers, ","),
			EnvPeerFD+"=3",
			EnvJobID+"=process-test",
			EnvTimeoutSecs+"="+timeoutSecs,
			EnvPeerToken+"="+testToken,
		)
		cmd.Env = append(cmd.Env, env...)
		p := &rankProc{cmd: cmd, stderr: new(bytes.Buffer), iters: make(chan struct{}, 1<<16), exited: make(chan struct{})}
		cmd.Stderr = p.stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The child owns the listener now.
		f.Close()
		lns[r].Close()
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				select {
				case p.iters <- struct{}{}:
				default:
				}
			}
			p.err = cmd.Wait()
			close(p.exited)
		}()
		procs[r] = p
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return procs
}

func TestProcessFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	tests := []struct {
		name    string
		world   int
		victim  int
		signal  syscall.Signal
		timeout string // SPINDLE_COLLECTIVE_TIMEOUT
		kind    error
		// How long the survivors may take. For a kill it is far below the
		// timeout: the broken connections, not the timeout, must end it.
		within time.Duration
	}{
		{"kill", 3, 1, syscall.SIGKILL, "120", ErrPeerLost, 30 * time.Second},
		{"stop", 3, 2, syscall.SIGSTOP, "2", ErrPeerTimeout, 60 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			procs := startProcs(t, tc.world, tc.timeout)
			awaitIters(t, procs, 3)
			if err := procs[tc.victim].cmd.Process.Signal(tc.signal); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			want := fmt.Sprintf("peer rank %d (%s)", tc.victim, peerAddr(procs, tc.victim))
			for r, p := range procs {
				if r == tc.victim {
					continue
				}
				select {
				case <-p.exited:
				case <-time.After(tc.within):
					t.Fatalf("rank %d still running %s after rank %d got %v", r, tc.within, tc.victim, tc.signal)
				}
				var ee *exec.ExitError
				if !errors.As(p.err, &ee) || ee.ExitCode() != 3 {
					t.Fatalf("rank %d: exit %v, want the allreduce error exit\n%s", r, p.err, p.stderr)
				}
				msg := p.stderr.String()
				if !strings.Contains(msg, want) || !strings.Contains(msg, tc.kind.Error()) {
					t.Fatalf("rank %d: error %q does not say %q and %q", r, msg, want, tc.kind)
				}
			}
			t.Logf("survivors failed %s after %v of rank %d", time.Since(start).Round(time.Millisecond), tc.signal, tc.victim)
		})
	}
}

// awaitIters waits until every rank reported k iterations.
func awaitIters(t *testing.T, procs []*rankProc, k int) {
	t.Helper()
	for r, p := range procs {
		for range k {
			select {
			case <-p.iters:
			case <-p.exited:
				t.Fatalf("rank %d exited early: %v\n%s", r, p.err, p.stderr)
			case <-time.After(time.Minute):
				t.Fatalf("rank %d made no progress", r)
			}
		}
	}
}

func peerAddr(procs []*rankProc, r int) string {
	for _, kv := range procs[r].cmd.Env {
		if v, ok := strings.CutPrefix(kv, EnvPeers+"="); ok {
			return strings.Split(v, ",")[r]
		}
	}
	return ""
}
