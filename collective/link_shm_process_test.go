package collective

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// Child-process settings of TestSharedMemoryProcesses.
const (
	childSmallEnv = "COLLECTIVE_TEST_SMALL_BYTES"
	childItersEnv = "COLLECTIVE_TEST_ITERS"
	// childPrintEnv makes the child print a line every that many
	// iterations, so that the parent sees it running.
	childPrintEnv = "COLLECTIVE_TEST_PRINT_EVERY"
)

// TestSharedMemoryProcesses runs many small allreduces between ranks as
// separate processes, whose rings and host segment are shared across
// address spaces: a lost wake-up would leave a rank asleep until the
// timeout and fail it.
func TestSharedMemoryProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	needShm(t)
	for _, tc := range []struct {
		name  string
		small string // Config.SmallBytes
	}{{"host", "0"}, {"tree", "65536"}, {"ring", "-1"}} {
		t.Run(tc.name, func(t *testing.T) {
			const world = 5
			procs := startChildren(t, world, "20", "small-allreduce", childSmallEnv+"="+tc.small, childItersEnv+"=1500")
			deadline := time.After(testutil.Scale(2 * time.Minute))
			for r, p := range procs {
				select {
				case <-p.exited:
				case <-deadline:
					t.Fatalf("rank %d still running after 2 minutes\n%s", r, p.stderr)
				}
				if p.err != nil {
					t.Fatalf("rank %d: %v\n%s", r, p.err, p.stderr)
				}
			}
		})
	}
}

// runSmallChild is one rank of TestSharedMemoryProcesses: it allreduces
// two floats many times and checks every sum.
func runSmallChild(ctx context.Context) int {
	cfg, err := ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		return 2
	}
	small, err1 := strconv.Atoi(os.Getenv(childSmallEnv))
	iters, err2 := strconv.Atoi(os.Getenv(childItersEnv))
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "bad", childSmallEnv, "or", childItersEnv)
		return 2
	}
	every, _ := strconv.Atoi(os.Getenv(childPrintEnv))
	cfg.SmallBytes = small
	comm, err := New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "join:", err)
		return 2
	}
	defer comm.Close()
	n := comm.WorldSize()
	for i := range iters {
		data := []float32{float32(comm.Rank() + i), 1}
		if err := AllReduce(ctx, comm, data, Sum); err != nil {
			fmt.Fprintf(os.Stderr, "allreduce %d: %v\n", i, err)
			return 3
		}
		if want := float32(n*i + n*(n-1)/2); data[0] != want || data[1] != float32(n) {
			fmt.Fprintf(os.Stderr, "allreduce %d: got %v, want [%v %d]\n", i, data, want, n)
			return 3
		}
		if every > 0 && i%every == 0 {
			fmt.Printf("iter %d\n", i)
		}
	}
	return 0
}
