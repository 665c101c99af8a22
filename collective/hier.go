package collective

import (
	"context"
	"net"
	"slices"
	"strconv"

	"golang.org/x/sync/errgroup"
)

// The hierarchical allreduce, for large vectors on ranks spread over hosts
// with several ranks each. The flat ring takes 2(n-1) steps; this takes
// 2(g-1) within hosts and 2(H-1) across them, for H hosts of g ranks:
//
//  1. within each host, a ring reduce-scatter: local rank l ends up with
//     block l+1 of g summed over its host;
//  2. across hosts, the ranks with the same local index allreduce their
//     block over a ring of H (reduce-scatter, then allgather);
//  3. within each host, a ring allgather of the g blocks.
//
// Each host's link carries what one ring edge carries in the flat ring,
// 2(H-1)/H of the vector, but in 2(H-1) steps instead of 2(n-1), and the
// rest of the traffic stays inside hosts, where links are faster. Every
// element is reduced once per rank in a fixed order (up its host's ring,
// then across hosts), so every rank gets the same bits.

// HostsFromPeers, as Config.RanksPerHost, groups ranks by the host of
// their peer address.
const HostsFromPeers = -1

// hierarchy is where a rank sits among hosts: its host's ranks, and the
// ranks that share its local index on every host.
type hierarchy struct {
	local []int // ranks on this rank's host, in rank order
	li    int   // this rank's index in local
	cross []int // local[li]'s counterparts, one per host, in host order
	hi    int   // this rank's index in cross
}

// hostsOf returns each rank's host: groups of perHost consecutive ranks
// when perHost > 0 (hosts simulated by rank groups), else the host part of
// each peer address.
func hostsOf(peers []string, world, perHost int) []string {
	hosts := make([]string, world)
	for r := range hosts {
		switch {
		case perHost > 0:
			hosts[r] = strconv.Itoa(r / perHost)
		case r < len(peers):
			hosts[r], _, _ = net.SplitHostPort(peers[r])
		}
	}
	return hosts
}

// newHierarchy places rank among hosts; nil when a hierarchy would not
// help (one host, or one rank per host) or cannot run (hosts with
// different numbers of ranks).
func newHierarchy(rank int, hosts []string) *hierarchy {
	var order []string // hosts in order of their lowest rank
	byHost := map[string][]int{}
	for r, h := range hosts {
		if _, ok := byHost[h]; !ok {
			order = append(order, h)
		}
		byHost[h] = append(byHost[h], r)
	}
	g := len(byHost[hosts[rank]])
	if len(order) < 2 || g < 2 {
		return nil
	}
	for _, h := range order {
		if len(byHost[h]) != g {
			return nil
		}
	}
	hr := &hierarchy{local: byHost[hosts[rank]]}
	hr.li = slices.Index(hr.local, rank)
	for i, h := range order {
		hr.cross = append(hr.cross, byHost[h][hr.li])
		if h == hosts[rank] {
			hr.hi = i
		}
	}
	return hr
}

// peers returns the ranks the hierarchy exchanges data with.
func (hr *hierarchy) peers() []int {
	g, n := len(hr.local), len(hr.cross)
	return []int{hr.local[mod(hr.li-1, g)], hr.local[mod(hr.li+1, g)], hr.cross[mod(hr.hi-1, n)], hr.cross[mod(hr.hi+1, n)]}
}

// useHier reports whether an allreduce of size bytes per rank runs the
// hierarchy (choose.go).
func (c *Comm) useHier(size int) bool { return c.allReduceAlgo(size) == algoHier }

// hierAllReduce runs the hierarchical allreduce over data, count elements
// of esize bytes, with header h. Called with c.mu held.
func (c *Comm) hierAllReduce(ctx context.Context, h header, data []byte, count, esize int, combine func(dst, src []byte, final bool)) error {
	// The header goes round the flat ring first, as every operation's
	// does, so a rank that called something else is caught at once.
	if err := c.exchangeHeader(ctx, h); err != nil {
		return err
	}
	hr := c.hier
	g, n := len(hr.local), len(hr.cross)
	lnext, lprev := hr.local[mod(hr.li+1, g)], hr.local[mod(hr.li-1, g)]
	xnext, xprev := hr.cross[mod(hr.hi+1, n)], hr.cross[mod(hr.hi-1, n)]
	block := func(k int) [2]int {
		lo, hi := segment(k, g, count, esize)
		return [2]int{lo, hi}
	}
	for s := 0; s < g-1; s++ {
		if err := c.hierStep(ctx, lnext, lprev, data, block(mod(hr.li-s, g)), block(mod(hr.li-s-1, g)), true, false, combine); err != nil {
			return err
		}
	}
	// This rank's block, summed over its host, is allreduced across hosts.
	b := block(mod(hr.li+1, g))
	sub := func(k int) [2]int {
		lo, hi := segment(k, n, (b[1]-b[0])/esize, esize)
		return [2]int{b[0] + lo, b[0] + hi}
	}
	for s := 0; s < n-1; s++ {
		if err := c.hierStep(ctx, xnext, xprev, data, sub(mod(hr.hi-s, n)), sub(mod(hr.hi-s-1, n)), true, s == n-2, combine); err != nil {
			return err
		}
	}
	for s := 0; s < n-1; s++ {
		if err := c.hierStep(ctx, xnext, xprev, data, sub(mod(hr.hi+1-s, n)), sub(mod(hr.hi-s, n)), false, false, combine); err != nil {
			return err
		}
	}
	for s := 0; s < g-1; s++ {
		if err := c.hierStep(ctx, lnext, lprev, data, block(mod(hr.li+1-s, g)), block(mod(hr.li-s, g)), false, false, combine); err != nil {
			return err
		}
	}
	return nil
}

// exchangeHeader sends h to the right ring neighbour and checks the left
// one's against it.
func (c *Comm) exchangeHeader(ctx context.Context, h header) error {
	if err := c.t.Send(ctx, c.right, h.encode()); err != nil {
		return err
	}
	hb := make([]byte, headerLen)
	if err := c.t.Recv(ctx, c.left, hb); err != nil {
		return err
	}
	return c.checkHeader(h, hb, c.left)
}

// hierStep sends data[out] to next while it receives data[in] from prev,
// reducing it into place when reduce is set (final: the elements' last
// reduction). Both sides cut the same blocks, so an empty one is skipped
// by both.
func (c *Comm) hierStep(ctx context.Context, next, prev int, data []byte, out, in [2]int, reduce, final bool,
	combine func(dst, src []byte, final bool)) error {
	var g errgroup.Group
	if out[1] > out[0] {
		g.Go(func() error { return c.t.Send(ctx, next, data[out[0]:out[1]]) })
	}
	rerr := c.hierRecv(ctx, prev, data[in[0]:in[1]], reduce, final, combine)
	if serr := g.Wait(); rerr == nil {
		rerr = serr
	}
	return rerr
}

// hierRecv receives dst from prev, or receives it piecewise into scratch
// and reduces it into dst.
func (c *Comm) hierRecv(ctx context.Context, prev int, dst []byte, reduce, final bool, combine func(dst, src []byte, final bool)) error {
	if len(dst) == 0 {
		return nil
	}
	if !reduce {
		return c.t.Recv(ctx, prev, dst)
	}
	for lo := 0; lo < len(dst); lo += len(c.scratch) {
		d := dst[lo:min(lo+len(c.scratch), len(dst))]
		tmp := c.scratch[:len(d)]
		if err := c.t.Recv(ctx, prev, tmp); err != nil {
			return err
		}
		combine(d, tmp, final)
	}
	return nil
}
