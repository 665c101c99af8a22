package collective

import (
	"fmt"
	"testing"
)

// BenchmarkAllReduceHier compares the hierarchical allreduce with the flat
// ring on hosts simulated by groups of 8 in-process ranks (all on this
// machine: what it measures is the algorithm's own cost, its steps and
// copies, not a faster link inside hosts), above the tree's sizes.
func BenchmarkAllReduceHier(b *testing.B) {
	for _, n := range []int{16, 64} {
		for _, size := range []int{256 << 10, 1 << 20, 4 << 20} {
			for _, algo := range []struct {
				name    string
				perHost int
			}{{"ring", 0}, {"hier", 8}} {
				b.Run(fmt.Sprintf("ranks=%d/size=%d/algo=%s", n, size, algo.name), func(b *testing.B) {
					benchAllReduce(b, n, size, func(_ int, cfg *Config) {
						cfg.SmallBytes = -1
						cfg.RanksPerHost = algo.perHost
					})
				})
			}
		}
	}
}
