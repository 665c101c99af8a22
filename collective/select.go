package collective

import (
	"math/bits"
	"net"
	"slices"
)

// Choosing the allreduce algorithm. The ring takes 2(n-1) steps of 1/n of
// the vector each: its time grows with n, which only pays when the vector
// is large enough for bandwidth to dominate. The binomial tree (tree.go)
// takes 2L steps of the whole vector, L = ceil(log2 n) its depth. With α
// the cost of one message and β that of one byte, the tree is faster while
//
//	2L (α + Sβ) < 2(n-1) (α + Sβ/n),
//
// that is for vectors of S bytes below
//
//	S* = (α/β) (n-1-L) / (L - (n-1)/n).
//
// The depth is a whole number of steps: a world one rank past a power of
// two needs a step more than that power, which lowers S* there (three
// ranks take as many steps by the tree as by the ring, and never run it).
// DefaultSmallBytes is S* with α/β measured on loopback and scaled to a
// 25 Gb/s network (docs/benchmarks.md).

// alphaOverBeta is α/β in bytes: the message size whose transfer costs as
// much as sending a message at all (modelAlpha, modelBeta).
const alphaOverBeta = modelAlpha / modelBeta

// DefaultSmallBytes returns the largest allreduce, in bytes, that runs the
// binomial tree by default on a world of n ranks; larger ones run the ring.
// Two ranks always run the ring, which then takes as many steps as the
// tree with half the bytes.
func DefaultSmallBytes(n int) int {
	if n <= 2 {
		return 0
	}
	l := float64(treeDepth(n))
	return max(int(alphaOverBeta*(float64(n)-1-l)/(l-float64(n-1)/float64(n))), 0)
}

// treeDepth returns the depth of the binomial tree of n ranks, ceil(log2 n):
// the steps a vector takes from the farthest leaf to the root.
func treeDepth(n int) int { return bits.Len(uint(n - 1)) }

// oneHostSmallBytes caps the tree by default when every rank is on one host
// and the TCP link moves the bytes through shared memory. Up to
// hostMaxBytes the host segment (host.go) takes the tree's place there:
// it costs n arrivals and one wake instead of 2(n-1) messages, each a
// doorbell when its receiver sleeps (docs/benchmarks.md). There the ring's
// pieces go from rank to rank mostly without a system call while its ranks
// overlap: at 32 ranks it measured as fast as the tree at 128 KiB and twice
// as fast at 256 KiB (docs/benchmarks.md), sizes the cluster model
// (DefaultSmallBytes: 302 KB there) gives the tree. At 32 KiB the tree
// was 2.3x to 6x faster from 16 to 64 ranks.
const oneHostSmallBytes = 64 << 10

// smallBytesOf resolves cfg.SmallBytes for cfg's world and link.
func smallBytesOf(cfg Config) int {
	s := smallBytes(cfg.SmallBytes, cfg.WorldSize)
	if cfg.SmallBytes == 0 && sharedMemoryLink(cfg) && oneHost(cfg.Peers) {
		s = min(s, oneHostSmallBytes)
	}
	return s
}

// sharedMemoryLink reports whether cfg's link moves the bytes of ranks on
// one host through shared memory: the default TCP link, unless told not to.
func sharedMemoryLink(cfg Config) bool {
	switch l := cfg.Link.(type) {
	case nil:
		return !cfg.NoSharedMemory
	case TCPLinker:
		return !l.NoSharedMemory
	}
	return false
}

// oneHost reports whether every peer address names the same host. Every
// rank holds the same list, so every rank decides alike.
func oneHost(peers []string) bool {
	first := ""
	for i, p := range peers {
		h, _, err := net.SplitHostPort(p)
		if err != nil {
			return false
		}
		if i == 0 {
			first = h
		} else if h != first {
			return false
		}
	}
	return len(peers) > 0
}

// smallBytes resolves Config.SmallBytes for a world of n ranks.
func smallBytes(configured, n int) int {
	switch {
	case configured < 0:
		return -1
	case configured == 0:
		return DefaultSmallBytes(n)
	}
	return configured
}

// treeAllowed reports whether a reduction of size bytes per rank may run
// the binomial tree: it is linked, and size is within Config.SmallBytes.
// A barrier runs the host segment when there is one, else the tree
// whenever it may.
func (c *Comm) treeAllowed(size int) bool {
	return c.treeLinked && c.world > 1 && size <= c.small
}

// useTree reports whether an allreduce of size bytes per rank runs the
// binomial tree.
func (c *Comm) useTree(size int) bool { return c.allReduceAlgo(size) == algoTree }

// linkedPeers returns the ranks a rank has data links with, in each
// direction: its ring neighbours, its parent and its children in the
// binomial tree.
func linkedPeers(rank, world int) []int {
	left, right := ringNeighbours(rank, world)
	peers := []int{left, right}
	if rank > 0 {
		peers = append(peers, treeParent(rank))
	}
	peers = append(peers, treeChildren(rank, world)...)
	slices.Sort(peers)
	return slices.Compact(peers)
}

// treeChildren returns rank r's children in a binomial tree of n ranks
// rooted at rank 0, in increasing order (smallest subtree first): r+2^k for
// every 2^k below r's lowest set bit (every 2^k for the root) while
// r+2^k < n.
func treeChildren(r, n int) []int {
	var kids []int
	for k := 1; k < n && (r == 0 || k < r&-r); k <<= 1 {
		if r+k < n {
			kids = append(kids, r+k)
		}
	}
	return kids
}

// treeParent returns rank r's parent (r > 0): r with its lowest set bit
// cleared.
func treeParent(r int) int { return r &^ (r & -r) }
