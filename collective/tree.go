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
//
// Every rank's header also reaches its right ring neighbour, as in ring
// operations, so that a rank which called something else (a ring
// operation, another size) is caught by its neighbour rather than left
// waiting until the timeout. Where the right neighbour is this rank's
// child in the tree (every even rank but the last), the header rides on
// the tree's own message down to it, which the child reads header first;
// only the other ring edges carry a header of their own (foldedEdge).
func (c *Comm) tree(ctx context.Context, h header, data []byte, combine func(dst, src []byte, final bool)) error {
	r := c.rank
	need := 2 * (headerLen + len(data))
	if cap(c.exchange) < need {
		c.exchange = make([]byte, need)
	}
	out := c.exchange[:headerLen+len(data)]
	in := c.exchange[len(out):need]
	h.put(out[:headerLen])
	recv := func(peer int) error {
		if err := c.t.Recv(ctx, peer, in); err != nil {
			return err
		}
		return c.checkHeader(h, in[:headerLen], peer)
	}
	if !foldedEdge(r, c.right) {
		if err := c.t.Send(ctx, c.right, out[:headerLen]); err != nil {
			return err
		}
	}
	if !foldedEdge(c.left, r) {
		if err := c.t.Recv(ctx, c.left, in[:headerLen]); err != nil {
			return err
		}
		if err := c.checkHeader(h, in[:headerLen], c.left); err != nil {
			return err
		}
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
		if err := c.treeUpDown(ctx, h, out, in); err != nil {
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

// treeUpDown sends this rank's partial result out to its parent and
// receives the final one into in. From a parent that is also the left ring
// neighbour the header is read and checked first: it is the only header
// that neighbour sends this rank, and a neighbour that called a ring
// operation sends no more than its header before it waits.
func (c *Comm) treeUpDown(ctx context.Context, h header, out, in []byte) error {
	parent := treeParent(c.rank)
	if err := c.t.Send(ctx, parent, out); err != nil {
		return err
	}
	if foldedEdge(c.left, c.rank) {
		if err := c.t.Recv(ctx, parent, in[:headerLen]); err != nil {
			return err
		}
		if err := c.checkHeader(h, in[:headerLen], parent); err != nil {
			return err
		}
		return c.t.Recv(ctx, parent, in[headerLen:])
	}
	if err := c.t.Recv(ctx, parent, in); err != nil {
		return err
	}
	return c.checkHeader(h, in[:headerLen], parent)
}

// foldedEdge reports whether the ring edge from rank from to its right
// neighbour to is a tree edge down from parent to child, whose header
// the tree's message carries: to is from's child (from even, to = from+1).
// The edge from the last rank to rank 0 never is.
func foldedEdge(from, to int) bool { return to != 0 && treeParent(to) == from }
