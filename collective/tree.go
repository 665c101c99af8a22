package collective

import "context"

// The binomial tree: the allreduce for small vectors. The vector is
// reduced up a binomial tree rooted at rank 0 (select.go), each rank
// adding its children's partial sums in increasing order, then the root's
// result is sent back down. That is 2 log2 n hops end to end, against
// 2(n-1) for the ring, and 2(n-1) messages in all, against 2n(n-1).
// Recursive doubling, which takes log2 n hops, was measured too and lost:
// it sends n log2 n messages, and where ranks share cores the message
// count bounds the time as much as the hop count does.
//
// The root computes every element once, in a fixed order, and every rank
// receives its bits, so results are identical across ranks.

// tree runs the binomial-tree allreduce over data with header h; combine
// reduces a child's vector into this rank's, final marking the last
// reduction (the root's last, for Mean). Barrier runs it too, with one
// byte and a combine that does nothing. Called with c.mu held.
//
// A message is the header followed by the vector, sent and received whole:
// one system call each way. A rank whose call has a different length still
// reads a whole header from a peer sending at least as much as it expects,
// and reports the mismatch.
func (c *Comm) tree(ctx context.Context, h header, data []byte, combine func(dst, src []byte, final bool)) error {
	r := c.rank
	need := 2 * (headerLen + len(data))
	if cap(c.exchange) < need {
		c.exchange = make([]byte, need)
	}
	out := c.exchange[:headerLen+len(data)]
	in := c.exchange[len(out):need]
	copy(out, h.encode())
	recv := func(peer int) error {
		if err := c.t.Recv(ctx, peer, in); err != nil {
			return err
		}
		return c.checkHeader(h, in[:headerLen], peer)
	}
	// The header goes round the ring first, as every operation's does: a
	// rank that called something else (a ring operation, or another size)
	// is then caught by its right neighbour even where the two algorithms
	// would otherwise wait on each other until the timeout.
	if err := c.t.Send(ctx, c.right, out[:headerLen]); err != nil {
		return err
	}
	if err := c.t.Recv(ctx, c.left, in[:headerLen]); err != nil {
		return err
	}
	if err := c.checkHeader(h, in[:headerLen], c.left); err != nil {
		return err
	}
	kids := treeChildren(r, c.world)
	for i, kid := range kids {
		if err := recv(kid); err != nil {
			return err
		}
		combine(data, in[headerLen:], r == 0 && i == len(kids)-1)
	}
	copy(out[headerLen:], data)
	if r != 0 {
		parent := treeParent(r)
		if err := c.t.Send(ctx, parent, out); err != nil {
			return err
		}
		if err := recv(parent); err != nil {
			return err
		}
		copy(data, in[headerLen:])
		copy(out[headerLen:], data)
	}
	// Largest subtree first: it has the longest way still to go.
	for i := len(kids) - 1; i >= 0; i-- {
		if err := c.t.Send(ctx, kids[i], out); err != nil {
			return err
		}
	}
	return nil
}
