package collective

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// BenchmarkAllReduce measures ring allreduce between in-process ranks on
// loopback over the TCP link and reports bus bandwidth, 2(n-1)/n × bytes / time, the figure
// that is comparable across world sizes. collective/bench runs the same
// measurement across processes beside PyTorch's gloo and, with -links
// and -perftest, over the UCX link beside ucx_perftest; rdma/ucx's
// BenchmarkAllReduceUCX is this benchmark over the UCX link.
//
// COLLECTIVE_BENCH_CHUNK and COLLECTIVE_BENCH_SOCKBUF override the chunk
// and socket buffer sizes, for tuning.
func BenchmarkAllReduce(b *testing.B) {
	chunk := benchEnvInt(b, "COLLECTIVE_BENCH_CHUNK")
	sockBuf := benchEnvInt(b, "COLLECTIVE_BENCH_SOCKBUF")
	for _, n := range []int{2, 4} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("ranks=%d/size=%s", n, sizeName(size)), func(b *testing.B) {
				comms := benchCluster(b, n, chunk, sockBuf)
				count := size / 4
				bufs := make([][]float32, n)
				for r := range n {
					bufs[r] = make([]float32, count)
					for i := range bufs[r] {
						bufs[r][i] = float32(r + i%13)
					}
				}
				run := func() {
					errs := make(chan error, n)
					for r, c := range comms {
						go func() { errs <- AllReduce(context.Background(), c, bufs[r], Sum) }()
					}
					for range n {
						if err := <-errs; err != nil {
							b.Fatal(err)
						}
					}
				}
				run() // warm up
				b.SetBytes(int64(count * 4))
				b.ResetTimer()
				for range b.N {
					run()
				}
				secs := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(2*float64(n-1)/float64(n)*float64(count*4)/secs/1e9, "busGB/s")
			})
		}
	}
}

// benchSizes are the tensor sizes of the allreduce benchmarks: a
// latency-bound one, a middling one, and one bound by bandwidth.
var benchSizes = []int{4 << 10, 1 << 20, 64 << 20}

// sizeName prints a size as 4KiB or 64MiB.
func sizeName(b int) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%dMiB", b>>20)
	}
	return fmt.Sprintf("%dKiB", b>>10)
}

func benchCluster(b *testing.B, n, chunk, sockBuf int) []*Comm {
	b.Helper()
	comms, errs := startRanks(b, n, func(_ int, cfg *Config) {
		if chunk != 0 {
			cfg.ChunkBytes = chunk
		}
		if sockBuf != 0 {
			cfg.SocketBufferBytes = sockBuf
		}
	})
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms
}

func benchEnvInt(b *testing.B, name string) int {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}
