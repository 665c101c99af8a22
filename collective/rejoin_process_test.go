package collective

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// Child-process settings of the rejoin test beyond the executor's
// contract: which incarnation of every rank this one starts with, and the
// survivor that hands a replacement the training state.
const (
	childIncarnationsEnv = "COLLECTIVE_TEST_INCARNATIONS"
	childRootEnv         = "COLLECTIVE_TEST_STATE_ROOT"
)

// runRejoinChild trains a counter: every step allreduces, then counts.
// When a peer is lost it prints "lost R", reads the new membership from
// stdin ("PEERS INCARNATIONS ROOT", comma-separated), rejoins (or, when
// PEERS lists fewer ranks, forms the smaller world) and takes the step
// from ROOT; a replacement takes it from ROOT at the start. It
// prints "step S" after every step.
func runRejoinChild(ctx context.Context) int {
	cfg, err := ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		return 2
	}
	cfg.Logger = quietLogger()
	root := -1
	if v := os.Getenv(childIncarnationsEnv); v != "" {
		cfg.Incarnations = parseIncarnations(v)
		root, _ = strconv.Atoi(os.Getenv(childRootEnv))
	}
	comm, err := New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "join:", err)
		return 2
	}
	defer func() { comm.Close() }()
	in := bufio.NewScanner(os.Stdin)
	step := []float64{0}
	for {
		if root >= 0 {
			if err := Broadcast(ctx, comm, step, root); err != nil {
				fmt.Fprintln(os.Stderr, "state broadcast:", err)
				return 3
			}
			root = -1
		}
		err := AllReduce(ctx, comm, make([]float32, 1<<16), Sum)
		if err == nil {
			step[0]++
			fmt.Printf("step %d\n", int(step[0]))
			continue
		}
		lost, ok := LostRank(err)
		if !ok {
			fmt.Fprintln(os.Stderr, "error:", err)
			return 3
		}
		fmt.Printf("lost %d\n", lost)
		if !in.Scan() {
			fmt.Fprintln(os.Stderr, "no new membership after:", err)
			return 3
		}
		f := strings.Fields(in.Text())
		root, _ = strconv.Atoi(f[2])
		peers := strings.Split(f[0], ",")
		if len(peers) < comm.WorldSize() {
			comm, err = comm.Shrink(ctx, peers, parseIncarnations(f[1]))
		} else {
			comm, err = comm.Rejoin(ctx, peers, parseIncarnations(f[1]))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rejoin:", err)
			return 3
		}
	}
}

func parseIncarnations(s string) []uint32 {
	var out []uint32
	for _, v := range strings.Split(s, ",") {
		n, _ := strconv.ParseUint(v, 10, 32)
		out = append(out, uint32(n))
	}
	return out
}

// rejoinProc is one rank of the rejoin test, run as a child process.
type rejoinProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	exited chan struct{}
}

// startRejoinProc starts rank of world on ln as a real process.
func startRejoinProc(t *testing.T, rank int, peers []string, ln net.Listener, extra ...string) *rejoinProc {
	t.Helper()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	defer ln.Close() // the child owns the port now
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.ExtraFiles = []*os.File{f}
	cmd.Env = append(os.Environ(),
		childEnv+"=rejoin-loop",
		EnvRank+"="+strconv.Itoa(rank),
		EnvWorldSize+"="+strconv.Itoa(len(peers)),
		EnvPeers+"="+strings.Join(peers, ","),
		EnvPeerFD+"=3",
		EnvJobID+"=rejoin-test",
		EnvTimeoutSecs+"=120",
		EnvPeerToken+"="+testToken,
	)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &rejoinProc{cmd: cmd, stdin: stdin, lines: make(chan string, 1<<16), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// next returns the process's next output line, failing the test when it
// exits or stays silent for a minute.
func (p *rejoinProc) next(t *testing.T, rank int) string {
	t.Helper()
	silent := testutil.NewTimer(time.Minute)
	defer silent.Stop()
	select {
	case l := <-p.lines:
		return l
	case <-p.exited:
		t.Fatalf("rank %d exited", rank)
	case <-silent.C:
		t.Fatalf("rank %d made no progress in %s", rank, silent)
	}
	return ""
}

// startTraining starts world ranks as real processes and waits until
// each has trained three steps.
func startTraining(t *testing.T, world int) ([]*rejoinProc, []string) {
	t.Helper()
	lns, peers := loopbackListeners(t, world)
	procs := make([]*rejoinProc, world)
	for r := range world {
		procs[r] = startRejoinProc(t, r, peers, lns[r])
	}
	for r, p := range procs {
		for range 3 {
			p.next(t, r)
		}
	}
	return procs, peers
}

// killRank SIGKILLs rank lost's process and waits until each survivor
// reports it lost (after the steps it finished).
func killRank(t *testing.T, procs []*rejoinProc, lost int, survivors []int) {
	t.Helper()
	if err := procs[lost].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, r := range survivors {
		for l := procs[r].next(t, r); l != fmt.Sprintf("lost %d", lost); l = procs[r].next(t, r) {
			if !strings.HasPrefix(l, "step ") {
				t.Fatalf("rank %d: %q, want the lost rank reported", r, l)
			}
		}
	}
}

// TestProcessRejoin kills the process of rank 1 of 3 in the middle of
// training and starts a new incarnation of it on a new port: the
// survivors keep their processes, rejoin, and hand the replacement their
// step, and all three train on.
func TestProcessRejoin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const world, lost = 3, 1
	procs, peers := startTraining(t, world)
	pids := []int{procs[0].cmd.Process.Pid, procs[2].cmd.Process.Pid}
	killRank(t, procs, lost, []int{0, 2})
	lns, _ := loopbackListeners(t, 1)
	ln := lns[0]
	peers[lost] = ln.Addr().String()
	const incs, root = "0,1,0", 0
	membership := fmt.Sprintf("%s %s %d\n", strings.Join(peers, ","), incs, root)
	for _, r := range []int{0, 2} {
		if _, err := io.WriteString(procs[r].stdin, membership); err != nil {
			t.Fatal(err)
		}
	}
	procs[lost] = startRejoinProc(t, lost, peers, ln,
		childIncarnationsEnv+"="+incs, childRootEnv+"="+strconv.Itoa(root))

	// All train on, in step: the replacement's first step follows the
	// survivors' last.
	var steps [world]int
	for r, p := range procs {
		for range 3 {
			l := p.next(t, r)
			n, err := strconv.Atoi(strings.TrimPrefix(l, "step "))
			if err != nil {
				t.Fatalf("rank %d: %q, want a step", r, l)
			}
			steps[r] = n
		}
	}
	if steps[lost] <= 3 {
		t.Fatalf("replacement is at step %d: it did not receive the survivors' state", steps[lost])
	}
	survivorsKept(t, procs, []int{0, 2}, pids)
}

// survivorsKept checks that the survivors' processes still run with the
// pids they had before a rank was lost.
func survivorsKept(t *testing.T, procs []*rejoinProc, survivors, pids []int) {
	t.Helper()
	for i, r := range survivors {
		if procs[r].cmd.Process.Pid != pids[i] {
			t.Fatalf("rank %d was restarted", r)
		}
		select {
		case <-procs[r].exited:
			t.Fatalf("survivor rank %d exited", r)
		default:
		}
	}
}

// TestProcessShrink kills the process of rank 1 of 4 in the middle of
// training: the three survivors keep their processes and ports, form a
// world of 3 (renumbered 0 to 2), take rank 0's step and train on in
// step.
func TestProcessShrink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const world, lost = 4, 1
	procs, peers := startTraining(t, world)
	survivors := []int{0, 2, 3}
	pids := make([]int, len(survivors))
	for i, r := range survivors {
		pids[i] = procs[r].cmd.Process.Pid
	}
	killRank(t, procs, lost, survivors)
	// The survivors in their old order; the epoch one more, on rank 0.
	membership := strings.Join([]string{peers[0], peers[2], peers[3]}, ",") + " 1,0,0 0\n"
	for _, r := range survivors {
		if _, err := io.WriteString(procs[r].stdin, membership); err != nil {
			t.Fatal(err)
		}
	}
	// All train on in step: the same step numbers on every survivor.
	var steps [3][3]string
	for i, r := range survivors {
		for k := range steps[i] {
			if steps[i][k] = procs[r].next(t, r); !strings.HasPrefix(steps[i][k], "step ") {
				t.Fatalf("rank %d: %q, want a step", r, steps[i][k])
			}
		}
	}
	if steps[1] != steps[0] || steps[2] != steps[0] {
		t.Fatalf("the survivors are not in step after shrinking: %v", steps)
	}
	survivorsKept(t, procs, survivors, pids)
}
