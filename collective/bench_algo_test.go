package collective

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAllReduceAlgos compares the allreduce algorithms between
// in-process ranks over the TCP link on loopback, across world sizes and
// message sizes: algo=auto is the default choice (DefaultSmallBytes),
// algo=ring forces the ring and algo=tree forces the binomial tree.
// docs/benchmarks.md derives the thresholds and the latency-bandwidth
// model from its output. Run it with a short -benchtime: 64 ranks share
// this machine's cores. COLLECTIVE_BENCH_LINK=mem runs it over the
// in-memory link instead, which costs no system calls per message.
func BenchmarkAllReduceAlgos(b *testing.B) {
	algos := []struct {
		name  string
		small int
	}{{"auto", 0}, {"ring", -1}, {"tree", 1 << 30}}
	for _, n := range []int{8, 16, 32, 64} {
		for _, size := range []int{8, 1 << 10, 8 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20} {
			for _, algo := range algos {
				if algo.name == "tree" && size > 1<<20 {
					continue // slow to measure
				}
				b.Run(fmt.Sprintf("ranks=%d/size=%d/algo=%s", n, size, algo.name), func(b *testing.B) {
					benchAlgo(b, n, size, algo.small)
				})
			}
		}
	}
}

func benchAlgo(b *testing.B, n, size, small int) {
	benchAllReduce(b, n, size, func(_ int, cfg *Config) { cfg.SmallBytes = small })
}

// benchAllReduce times allreduces of size bytes on n in-process ranks
// configured by tweak.
func benchAllReduce(b *testing.B, n, size int, tweak func(rank int, cfg *Config)) {
	var linker Linker
	switch l := os.Getenv("COLLECTIVE_BENCH_LINK"); l {
	case "", "tcp":
	case "mem":
		linker = NewMemNetwork().Linker()
	default:
		b.Fatalf("COLLECTIVE_BENCH_LINK=%q: want tcp or mem", l)
	}
	comms, errs := startRanks(b, n, func(r int, cfg *Config) {
		tweak(r, cfg)
		cfg.Link = linker
	})
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
	count := max(size/4, 1)
	bufs := make([][]float32, n)
	for r := range bufs {
		bufs[r] = make([]float32, count)
	}
	// Each rank loops on its own goroutine, so that one iteration costs
	// what it costs a training loop, not a goroutine start per rank.
	start := make([]chan int, n)
	done := make(chan error, n)
	for r, c := range comms {
		start[r] = make(chan int)
		go func() {
			for iters := range start[r] {
				var err error
				for range iters {
					if err = AllReduce(context.Background(), c, bufs[r], Sum); err != nil {
						break
					}
				}
				done <- err
			}
		}()
	}
	defer func() {
		for _, s := range start {
			close(s)
		}
	}()
	run := func(iters int) {
		for _, s := range start {
			s <- iters
		}
		for range n {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	}
	run(1) // warm up
	b.SetBytes(int64(count * 4))
	b.ResetTimer()
	cpu := processCPU(b)
	run(b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/op")
	// The process's CPU time (user and system) per operation: what the
	// ranks cost the machine, which a busy machine's other work changes
	// far less than it changes the wall-clock time.
	b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-us/op")
}

// processCPU returns the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
