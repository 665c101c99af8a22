package collective

// Choosing among the allreduce algorithms by a per-link cost model, as
// NCCL's tuner does: α the cost of one message, β of one byte between
// hosts, β_host of one byte inside a host. For S bytes on n ranks, and
// for the hierarchy H hosts of g ranks:
//
//	ring: 2(n-1) (α + Sβ/n)
//	tree: 2L (α + Sβ), L = ceil(log2 n)
//	hier: 2(g-1) (α + Sβ_host/g) + 2(H-1) (α + Sβ/H)
//
// The hierarchy's steps across hosts carry g blocks of S/(gH) through each
// host's link at once, so S/H a step. It saves 2(n-g-H+1) messages over
// the ring and spends more bytes inside hosts: it wins up to a size (about
// 100 MiB for 125 hosts of 8 at 25 Gb/s) and loses above, and beats the
// tree from a size on that many ranks (1 MiB there). docs/benchmarks.md
// has the model's inputs and its error against measurements.

// The model's inputs: α, measured (the CPU both ends of a message spend
// in the Go stack, plus a little for the wire: docs/benchmarks.md), β, a
// 25 Gb/s network, and β_host, assumed for a host's shared memory (one
// host's ranks here cannot measure a faster link inside hosts).
const (
	modelAlpha    = 15e-6
	modelBeta     = 8 / 25e9
	modelBetaHost = 0.1e-9
)

// algorithm is one of the allreduce algorithms.
type algorithm uint8

const (
	algoRing algorithm = iota
	algoTree
	algoHier
	algoHost // the host segment (host.go)
)

// allReduceAlgo returns the algorithm of an allreduce of size bytes per
// rank on c.
func (c *Comm) allReduceAlgo(size int) algorithm {
	if c.host != nil && size <= hostMaxBytes {
		return algoHost
	}
	hosts, per := 0, 0
	if c.hier != nil {
		hosts, per = len(c.hier.cross), len(c.hier.local)
	}
	return chooseAllReduce(c.world, size, c.treeAllowed(size), c.smallAuto, hosts, per)
}

// chooseAllReduce picks the allreduce of size bytes on n ranks. tree says
// the tree may run (within Config.SmallBytes); hosts of per ranks are the
// hierarchy (0: none). With Config.SmallBytes set, the tree runs whenever
// it may and the hierarchy, if any, takes every other size; by default
// the model picks the cheapest, which without a hierarchy is the tree up
// to DefaultSmallBytes, the same crossover.
func chooseAllReduce(n, size int, tree, auto bool, hosts, per int) algorithm {
	if hosts == 0 || !auto {
		switch {
		case tree:
			return algoTree
		case hosts > 0:
			return algoHier
		}
		return algoRing
	}
	s := float64(size)
	best, cost := algoRing, ringCost(n, s)
	if h := hierCost(hosts, per, s); h < cost {
		best, cost = algoHier, h
	}
	if tree && treeCost(n, s) < cost {
		best = algoTree
	}
	return best
}

func ringCost(n int, s float64) float64 {
	return 2 * float64(n-1) * (modelAlpha + s*modelBeta/float64(n))
}

func treeCost(n int, s float64) float64 {
	return 2 * float64(treeDepth(n)) * (modelAlpha + s*modelBeta)
}

func hierCost(hosts, per int, s float64) float64 {
	return 2*float64(per-1)*(modelAlpha+s*modelBetaHost/float64(per)) + 2*float64(hosts-1)*(modelAlpha+s*modelBeta/float64(hosts))
}
