package collective

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkAllReduceSelect measures the default choice of allreduce
// (algo=auto) beside the ring (algo=ring) in one run, interleaved: each
// round runs every world size and size once with each algorithm, in
// alternating order, so a change in the machine's load hits both alike.
// The report (make bench, docs/benchmarks.md) takes the median over the
// rounds of each.
//
// COLLECTIVE_BENCH_ROUNDS (3), COLLECTIVE_BENCH_RANKS (8,16,32,64) and
// COLLECTIVE_BENCH_SIZES (8 B to 64 MiB by powers of 8) narrow it;
// COLLECTIVE_BENCH_ALGOS picks from ring, auto and tree (the binomial tree
// forced), each also with -sockets (Config.NoSharedMemory), and
// auto-futex: auto with the host segment's ranks sleeping on the futex,
// as ranks in processes of their own do, rather than on a channel. A size
// whose buffers would take more than 1 GiB over all ranks is left out.
func BenchmarkAllReduceSelect(b *testing.B) {
	rounds := envInts(b, "COLLECTIVE_BENCH_ROUNDS", []int{3})[0]
	ranks := envInts(b, "COLLECTIVE_BENCH_RANKS", []int{8, 16, 32, 64})
	sizes := envInts(b, "COLLECTIVE_BENCH_SIZES", []int{8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 64 << 20})
	algos := strings.Split(os.Getenv("COLLECTIVE_BENCH_ALGOS"), ",")
	if algos[0] == "" {
		algos = []string{"ring", "auto"}
	}
	small := map[string]int{"auto": 0, "ring": -1, "tree": 1 << 30}
	for round := range rounds {
		for _, n := range ranks {
			for _, size := range sizes {
				if n*size > 1<<30 {
					continue
				}
				order := slices.Clone(algos)
				if round%2 == 1 {
					// Every other round the other way round: what runs
					// second (after a large vector's buffers, say) changes.
					slices.Reverse(order)
				}
				for _, algo := range order {
					name, futex := strings.CutSuffix(algo, "-futex")
					name, sockets := strings.CutSuffix(name, "-sockets")
					s, ok := small[name]
					if !ok {
						b.Fatalf("COLLECTIVE_BENCH_ALGOS: %q is not ring, auto or tree (each with -sockets or not; auto with -futex)", algo)
					}
					b.Run(fmt.Sprintf("round=%d/ranks=%d/size=%d/algo=%s", round, n, size, algo), func(b *testing.B) {
						runtime.GC() // the last point's buffers
						// Each rank gets the shared-memory budget of a process
						// of its own, as the ranks of a job on one host have.
						defer func(old int64) { shmBudget = old }(shmBudget)
						shmBudget *= int64(n)
						benchAllReduce(b, n, size, func(_ int, cfg *Config) {
							cfg.SmallBytes = s
							cfg.NoSharedMemory = sockets
							cfg.hostFutex = futex
						})
					})
				}
			}
		}
	}
}

// envInts reads a comma-separated list of integers from the environment
// variable name, def when it is unset.
func envInts(b *testing.B, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 1 {
			b.Fatalf("%s=%q: want positive integers separated by commas", name, v)
		}
		out = append(out, i)
	}
	return out
}
