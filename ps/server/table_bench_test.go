package server

import (
	"cmp"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// BenchmarkTable measures a server's own work for a pull and a push of
// batch keys spread over a table of a quarter million rows, larger than
// the caches (as BenchmarkPullPush in ps/client), without a link: the
// lookups, the copies of the rows and AdaGrad's update. The keys come in
// the order a client sends them: a large request's in ps.SlotHash order,
// sorted before the clock starts.
func BenchmarkTable(b *testing.B) {
	for _, batch := range []int{1 << 10, 1 << 16} {
		for _, dim := range []int{8, 64} {
			b.Run(fmt.Sprintf("batch=%d/dim=%d", batch, dim), func(b *testing.B) {
				t := newTable(&pspb.TableSpec{Name: "emb", Dim: uint32(dim), Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad, LearningRate: 0.1}, Initializer: &pspb.Initializer{}})
				var bud budget
				const space = 1 << 18
				warm := make([]uint64, space)
				for i := range warm {
					warm[i] = uint64(i)
				}
				if err := t.ensure(warm, &bud); err != nil {
					b.Fatal(err)
				}
				rows := make([]float32, batch*dim)
				grads := make([]float32, batch*dim)
				for i := range grads {
					grads[i] = 0.01
				}
				calls := make([][]uint64, b.N)
				for i := range calls {
					calls[i] = make([]uint64, batch)
					for j := range calls[i] {
						calls[i][j] = uint64((i*batch + j*7919) % space)
					}
					if batch >= 4096 {
						slices.SortFunc(calls[i], func(a, b uint64) int { return cmp.Compare(ps.SlotHash(a), ps.SlotHash(b)) })
					}
				}
				b.ResetTimer()
				cpu0 := cpuTime()
				for i := range b.N {
					keys := calls[i]
					if err := t.pull(keys, rows, &bud); err != nil {
						b.Fatal(err)
					}
					if err := t.push(keys, grads, &bud); err != nil {
						b.Fatal(err)
					}
				}
				// CPU time as well: on a shared machine it moves much less
				// than the wall clock.
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "keys/s")
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*batch), "cpu-ns/key")
			})
		}
	}
}

// cpuTime returns the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
