package ucx

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/spindle-ml/spindle/collective"
)

// BenchmarkAllReduceUCX is collective's BenchmarkAllReduce over the UCX
// link: ring allreduce between in-process ranks, on the transport UCX_TLS
// names (tcp unless set; sm for shared memory), reporting bus bandwidth,
// 2(n-1)/n x bytes / time. collective/bench measures the same across
// processes, beside the TCP link and ucx_perftest.
func BenchmarkAllReduceUCX(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, size := range []int{4 << 10, 1 << 20, 64 << 20} {
			name := fmt.Sprintf("tls=%s/ranks=%d/size=%dKiB", os.Getenv("UCX_TLS"), n, size>>10)
			b.Run(name, func(b *testing.B) {
				comms := cluster(b, n, nil)
				count := size / 4
				bufs := make([][]float32, n)
				for r := range n {
					bufs[r] = make([]float32, count)
					for i := range bufs[r] {
						bufs[r][i] = float32(r + i%13)
					}
				}
				run := func() {
					for r, err := range onAll(comms, func(c *collective.Comm) error {
						return collective.AllReduce(context.Background(), c, bufs[c.Rank()], collective.Sum)
					}) {
						if err != nil {
							b.Fatalf("rank %d: %v", r, err)
						}
					}
				}
				run() // warm up
				b.SetBytes(int64(size))
				b.ResetTimer()
				for range b.N {
					run()
				}
				secs := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(2*float64(n-1)/float64(n)*float64(size)/secs/1e9, "busGB/s")
			})
		}
	}
}
