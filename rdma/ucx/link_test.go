package ucx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/testutil"
)

const (
	childEnv  = "UCX_LINK_TEST_CHILD"
	testToken = "0f1e2d3c4b5a69788796a5b4c3d2e1f0-ucx-test"
)

func TestMain(m *testing.M) {
	// The link's tests run over UCX's TCP transport unless told otherwise,
	// so they need no RDMA hardware; UCX_TLS=sm tests shared memory.
	if os.Getenv("UCX_TLS") == "" {
		os.Setenv("UCX_TLS", "tcp")
	}
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// needUCX skips the test, saying why, when this binary cannot use UCX.
func needUCX(t testing.TB) collective.Linker {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skipf("UCX link not tested: %s", why)
	}
	l, err := NewLinker()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// cluster starts n in-process ranks linked over UCX.
func cluster(t testing.TB, n int, tweak func(rank int, cfg *collective.Config)) []*collective.Comm {
	t.Helper()
	linker := needUCX(t)
	lns := make([]net.Listener, n)
	peers := make([]string, n)
	for r := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[r], peers[r] = ln, ln.Addr().String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	comms := make([]*collective.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		cfg := collective.Config{
			Rank: r, WorldSize: n, Peers: peers, Listener: lns[r], JobID: "ucx-test", Token: testToken,
			Timeout: 10 * time.Second, ConnectTimeout: 20 * time.Second, Link: linker, Logger: quietLogger(),
		}
		if tweak != nil {
			tweak(r, &cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = collective.New(ctx, cfg)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms
}

// onAll runs fn on every rank at once and returns the errors by rank.
func onAll(comms []*collective.Comm, fn func(c *collective.Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(c)
		}()
	}
	wg.Wait()
	return errs
}

func TestAllReduceOverUCX(t *testing.T) {
	for _, n := range []int{2, 3} {
		// Sizes around the bounce buffer and the segment size, and one
		// that the reduction takes in smaller pieces than were sent.
		for _, count := range []int{1, 1000, 2048, 65536, 300_000} {
			t.Run(fmt.Sprintf("ranks=%d/count=%d", n, count), func(t *testing.T) {
				comms := cluster(t, n, func(_ int, cfg *collective.Config) { cfg.ChunkBytes = 1 << 20 })
				bufs := make([][]float32, n)
				for r := range n {
					bufs[r] = make([]float32, count)
					for i := range bufs[r] {
						bufs[r][i] = float32(r*7 + i%11)
					}
				}
				for r, err := range onAll(comms, func(c *collective.Comm) error {
					return collective.AllReduce(context.Background(), c, bufs[c.Rank()], collective.Sum)
				}) {
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
				for r := range n {
					for i, v := range bufs[r] {
						want := float32(0)
						for k := range n {
							want += float32(k*7 + i%11)
						}
						if v != want {
							t.Fatalf("rank %d element %d = %v, want %v", r, i, v, want)
						}
					}
				}
				// A broadcast and a barrier on the same link.
				words := make([][]int64, n)
				for r, err := range onAll(comms, func(c *collective.Comm) error {
					words[c.Rank()] = []int64{int64(c.Rank()), 5}
					if err := collective.Broadcast(context.Background(), c, words[c.Rank()], n-1); err != nil {
						return err
					}
					return c.Barrier(context.Background())
				}) {
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
				for r := range n {
					if words[r][0] != int64(n-1) || words[r][1] != 5 {
						t.Fatalf("broadcast: rank %d has %v", r, words[r])
					}
				}
			})
		}
	}
}

// blamed checks that err is a *PeerError naming rank and wrapping kind.
func blamed(t *testing.T, who int, err error, rank int, kind error) {
	t.Helper()
	var pe *collective.PeerError
	if !errors.As(err, &pe) || pe.Rank != rank || !errors.Is(err, kind) {
		t.Fatalf("rank %d: got %v, want rank %d blamed with %v", who, err, rank, kind)
	}
}

// The failure tests of the collective package, on this link.

func TestPeerStallOverUCX(t *testing.T) {
	const world, staller = 3, 2
	comms := cluster(t, world, func(_ int, cfg *collective.Config) { cfg.Timeout = 500 * time.Millisecond })
	errs := onAll(comms[:staller], func(c *collective.Comm) error {
		return collective.AllReduce(context.Background(), c, make([]float64, 1<<16), collective.Sum)
	})
	for r, err := range errs {
		blamed(t, r, err, staller, collective.ErrPeerTimeout)
	}
	if err := comms[staller].Barrier(context.Background()); err == nil {
		t.Fatal("the staller's next operation succeeded")
	}
}

func TestCancelMidOperationOverUCX(t *testing.T) {
	comms := cluster(t, 2, nil)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- collective.AllReduce(ctx, comms[0], make([]float32, 1000), collective.Sum) }()
	// Rank 1 never joins; rank 0 blocks until cancelled.
	time.AfterFunc(200*time.Millisecond, cancel)
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("rank 0: got %v, want context.Canceled", err)
	}
	err := collective.AllReduce(context.Background(), comms[1], make([]float32, 1000), collective.Sum)
	blamed(t, 1, err, 0, collective.ErrAborted)
}

func TestCloseMidOperationOverUCX(t *testing.T) {
	comms := cluster(t, 3, nil)
	res := make(chan error, 1)
	go func() { res <- comms[0].Barrier(context.Background()) }()
	time.AfterFunc(200*time.Millisecond, func() { comms[0].Close() })
	if err := <-res; !errors.Is(err, collective.ErrClosed) {
		t.Fatalf("rank 0: got %v, want ErrClosed", err)
	}
	for i, err := range onAll(comms[1:], func(c *collective.Comm) error { return c.Barrier(context.Background()) }) {
		blamed(t, i+1, err, 0, collective.ErrAborted)
	}
}

// runChild is a rank in its own process: it allreduces until it fails.
func runChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	cfg, err := collective.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		return 2
	}
	if cfg.Link, err = NewLinker(); err != nil {
		fmt.Fprintln(os.Stderr, "linker:", err)
		return 2
	}
	comm, err := collective.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "join:", err)
		return 2
	}
	defer comm.Close()
	data := make([]float32, 1<<18)
	for i := 0; ; i++ {
		if err := collective.AllReduce(ctx, comm, data, collective.Sum); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			return 3
		}
		fmt.Printf("iter %d\n", i)
	}
}

// TestProcessFailureOverUCX kills or stops one rank of a job of real
// processes and checks that the others name it, as on TCP.
func TestProcessFailureOverUCX(t *testing.T) {
	needUCX(t)
	if testing.Short() {
		t.Skip("starts child processes")
	}
	tests := []struct {
		name    string
		signal  syscall.Signal
		timeout string
		kind    error
		within  time.Duration
	}{
		{"kill", syscall.SIGKILL, "120", collective.ErrPeerLost, 30 * time.Second},
		{"stop", syscall.SIGSTOP, "2", collective.ErrPeerTimeout, 60 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const world, victim = 3, 1
			peers := make([]string, world)
			files := make([]*os.File, world)
			for r := range world {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				peers[r] = ln.Addr().String()
				files[r], err = ln.(*net.TCPListener).File()
				ln.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			type proc struct {
				cmd    *exec.Cmd
				stderr *bytes.Buffer
				iters  chan struct{}
				done   chan struct{}
				err    error
			}
			procs := make([]*proc, world)
			for r := range world {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.ExtraFiles = []*os.File{files[r]}
				cmd.Env = append(os.Environ(), childEnv+"=1",
					collective.EnvRank+"="+strconv.Itoa(r), collective.EnvWorldSize+"="+strconv.Itoa(world),
					collective.EnvPeers+"="+strings.Join(peers, ","), collective.EnvPeerFD+"=3",
					collective.EnvJobID+"=ucx-process-test", collective.EnvTimeoutSecs+"="+tc.timeout,
					collective.EnvPeerToken+"="+testToken)
				p := &proc{cmd: cmd, stderr: new(bytes.Buffer), iters: make(chan struct{}, 1<<16), done: make(chan struct{})}
				cmd.Stderr = p.stderr
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				files[r].Close()
				go func() {
					sc := bufio.NewScanner(out)
					for sc.Scan() {
						select {
						case p.iters <- struct{}{}:
						default:
						}
					}
					p.err = cmd.Wait()
					close(p.done)
				}()
				procs[r] = p
			}
			t.Cleanup(func() {
				for _, p := range procs {
					p.cmd.Process.Signal(syscall.SIGCONT)
					p.cmd.Process.Kill()
					<-p.done
				}
			})
			for r, p := range procs {
				for range 3 {
					select {
					case <-p.iters:
					case <-p.done:
						t.Fatalf("rank %d exited early: %v\n%s", r, p.err, p.stderr)
					case <-time.After(time.Minute):
						t.Fatalf("rank %d made no progress", r)
					}
				}
			}
			procs[victim].cmd.Process.Signal(tc.signal)
			start := time.Now()
			want := fmt.Sprintf("peer rank %d (%s)", victim, peers[victim])
			for r, p := range procs {
				if r == victim {
					continue
				}
				select {
				case <-p.done:
				case <-time.After(tc.within):
					t.Fatalf("rank %d still running %s after rank %d got %v", r, tc.within, victim, tc.signal)
				}
				msg := p.stderr.String()
				if !strings.Contains(msg, want) || !strings.Contains(msg, tc.kind.Error()) {
					t.Fatalf("rank %d: error %q does not say %q and %q", r, msg, want, tc.kind)
				}
			}
			t.Logf("survivors failed %s after %v of rank %d", time.Since(start).Round(time.Millisecond), tc.signal, victim)
		})
	}
}

// TestNegotiation checks the per-stream choice: UCX where both ends offer
// it, TCP (with a line saying why) where one does not, and a failure
// naming the reason where UCX is required.
func TestNegotiation(t *testing.T) {
	needUCX(t)
	declined := Linker{Spec: collective.LinkSpec{Name: Name, Declined: true}}
	without := collective.DecliningLinker{Kind: Name, Why: "this program has no ucx link"}
	required := Linker{Spec: collective.LinkSpec{Name: Name, Required: true, Forced: true}}
	tests := []struct {
		name    string
		linkers []collective.Linker // by rank; nil: NewLinker's
		logs    []string            // what each rank's log says
		fails   string              // what a failed setup says
	}{
		{name: "all offer", linkers: []collective.Linker{nil, nil, nil},
			logs: []string{"data link is ucx", "data link is ucx", "data link is ucx"}},
		// Ring 0→1→2→0: rank 1 declines, so 0→1 and 1→2 are TCP, 2→0 UCX.
		{name: "one declines", linkers: []collective.Linker{nil, declined, nil},
			logs: []string{"to some neighbours, tcp to others", "data link is tcp", "to some neighbours, tcp to others"}},
		{name: "one program without the package", linkers: []collective.Linker{nil, without, nil},
			logs: []string{"rank 1: this program has no ucx link", "data link is tcp", "to some neighbours, tcp to others"}},
		{name: "required but declined", linkers: []collective.Linker{required, declined},
			fails: "UCX required (SPINDLE_COLLECTIVE_LINK=ucx:required) but a link cannot use it: rank 1: no usable RDMA device on this rank"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			linkers := make([]collective.Linker, len(tc.linkers))
			for r, l := range tc.linkers {
				if linkers[r] = l; l == nil {
					linkers[r] = needUCX(t)
				}
			}
			comms, errs, logs := startComms(t, slices.Repeat([]string{"127.0.0.1"}, len(linkers)), linkers, 5*time.Second)
			if tc.fails != "" {
				if errs[0] == nil || !strings.Contains(errs[0].Error(), tc.fails) {
					t.Fatalf("rank 0: got %v, want an error saying %q", errs[0], tc.fails)
				}
				return
			}
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				if !strings.Contains(logs[r].String(), tc.logs[r]) {
					t.Errorf("rank %d logged %q, want %q", r, logs[r].String(), tc.logs[r])
				}
			}
			checkAllReduce(t, comms, 100_000)
		})
	}
}
