package collective

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// childEnv selects a child-process mode of the test binary: the process
// tests re-execute it as ranks of a real multi-process job.
const childEnv = "COLLECTIVE_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	goleak.VerifyTestMain(m)
}

// runChild is a training process: it joins from the environment, as under
// a Spindle executor, and allreduces until it fails or is killed. It prints
// one line per completed iteration, so the parent knows all ranks are in
// the thick of it.
func runChild(mode string) int {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	switch mode {
	case "rejoin-loop":
		return runRejoinChild(ctx)
	case "small-allreduce":
		return runSmallChild(ctx)
	}
	comm, err := FromEnv(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "join:", err)
		return 2
	}
	defer comm.Close()
	switch mode {
	case "allreduce-loop":
		data := make([]float32, 1<<20)
		for i := 0; ; i++ {
			for j := range data {
				data[j] = float32(comm.Rank() + j%7)
			}
			if err := AllReduce(ctx, comm, data, Sum); err != nil {
				fmt.Fprintln(os.Stderr, "error:", err)
				return 3
			}
			fmt.Printf("iter %d\n", i)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
}

// cluster starts n in-process ranks on loopback and returns their
// communicators; they are closed when the test ends.
func cluster(t *testing.T, n int, tweak func(rank int, cfg *Config)) []*Comm {
	t.Helper()
	comms, errs := startRanks(t, n, tweak)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: New: %v", r, err)
		}
	}
	return comms
}

// loopbackListeners returns n listeners on free loopback ports and their
// addresses.
func loopbackListeners(t testing.TB, n int) ([]net.Listener, []string) {
	t.Helper()
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	return lns, addrs
}

// startRanks is cluster without the error check, for tests of failing
// setups.
func startRanks(t testing.TB, n int, tweak func(rank int, cfg *Config)) ([]*Comm, []error) {
	t.Helper()
	lns, peers := loopbackListeners(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		cfg := Config{
			Rank:           r,
			WorldSize:      n,
			Peers:          peers,
			Listener:       lns[r],
			JobID:          "test-job",
			Timeout:        testutil.Scale(10 * time.Second),
			ConnectTimeout: testutil.Scale(10 * time.Second),
			Logger:         quietLogger(),
		}
		if tweak != nil {
			tweak(r, &cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = New(ctx, cfg)
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
	return comms, errs
}

// onAll runs fn for every rank concurrently and returns the errors by
// rank. The test fails if any rank has not returned within a minute.
func onAll(t *testing.T, comms []*Comm, fn func(c *Comm) error) []error {
	t.Helper()
	errs := make([]error, len(comms))
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(c)
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		for _, c := range comms {
			c.Close()
		}
		<-done
		t.Fatal("collective operation hung")
	}
	return errs
}

func mustAll(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// testLink is a data link the failure and authentication tests run on:
// every failure must be detected and blamed the same whatever carries the
// bytes.
type testLink struct {
	name string
	// linker returns the Linker for one communicator's ranks (nil: TCP).
	linker func() Linker
}

var testLinks = []testLink{
	{"tcp", func() Linker { return nil }}, // in-process ranks: shared memory
	{"tcp-sockets", func() Linker { return TCPLinker{NoSharedMemory: true} }},
	{"mem", func() Linker { return NewMemNetwork().Linker() }},
}

// on returns tweak with every rank set to use one fresh instance of l.
func (l testLink) on(tweak func(rank int, cfg *Config)) func(rank int, cfg *Config) {
	linker := l.linker()
	return func(rank int, cfg *Config) {
		cfg.Link = linker
		if tweak != nil {
			tweak(rank, cfg)
		}
	}
}

// onLinks runs fn as a subtest per data link.
func onLinks(t *testing.T, fn func(t *testing.T, l testLink)) {
	t.Helper()
	for _, l := range testLinks {
		t.Run("link="+l.name, func(t *testing.T) { fn(t, l) })
	}
}
