package collective

import (
	"context"
	"fmt"
	"unsafe"
)

// Float is the element type of reductions.
type Float interface {
	~float32 | ~float64
}

// Elem is the element type of operations that only move data.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// Op is a reduction.
type Op uint8

const (
	// Sum adds the ranks' values.
	Sum Op = iota
	// Mean adds the ranks' values and divides by the world size.
	Mean
)

// String returns the reduction's name.
func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Mean:
		return "mean"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// AllReduce replaces data, on every rank, with the element-wise reduction
// of every rank's data. All ranks must pass slices of the same length.
//
// Vectors of at most Config.SmallBytes run a binomial tree (tree.go),
// which takes 2 log2 n steps; larger ones run the ring algorithm: a
// reduce-scatter, after which each rank holds
// the final value of one block, then an allgather of those blocks. Each
// element is therefore reduced exactly once, in one fixed order (starting at
// the rank that owns its block and going round the ring), and every rank
// receives the same bits: results are bit-identical across ranks and across
// runs with the same world size and inputs. Data moves in chunks of
// Config.ChunkBytes, sending the chunk just reduced while the next is
// received.
func AllReduce[T Float](ctx context.Context, c *Comm, data []T, op Op) error {
	if op != Sum && op != Mean {
		return fmt.Errorf("collective: allreduce: unknown reduction %s", op)
	}
	var zero T
	esize := int(unsafe.Sizeof(zero))
	h := header{op: opAllReduce, elemSize: uint8(esize), reduce: uint8(op), count: uint64(len(data)), elem: fmt.Sprintf("%T", zero)}
	scale := T(c.world)
	combine := func(dst, src []byte, final bool) {
		d, s := fromBytes[T](dst), fromBytes[T](src)
		if final && op == Mean {
			addDiv(d, s, scale)
		} else {
			add(d, s)
		}
	}
	switch c.allReduceAlgo(len(data) * esize) {
	case algoHost:
		return c.do(ctx, h, func(h header) error {
			return c.hostAllReduce(ctx, h, asBytes(data), combine)
		})
	case algoTree:
		return c.do(ctx, h, func(h header) error {
			return c.tree(ctx, h, asBytes(data), combine)
		})
	}
	if c.useHier(len(data) * esize) {
		return c.do(ctx, h, func(h header) error {
			return c.hierAllReduce(ctx, h, asBytes(data), len(data), esize, combine)
		})
	}
	return c.run(ctx, h, func(p *plan) {
		n, r := c.world, c.rank
		b := asBytes(data)
		size := c.chunkSize(esize)
		steps := 2 * (n - 1)
		for s := range steps {
			lo, hi := segment(mod(r-s, n), n, len(data), esize)
			chunks(lo, hi, size, func(lo, hi int) {
				p.send(b, lo, hi, s > 0)
			})
			lo, hi = segment(mod(r-s-1, n), n, len(data), esize)
			chunks(lo, hi, size, func(lo, hi int) {
				p.recv(b, lo, hi, recvItem{
					reduce: s < n-1,
					final:  s == n-2,
					token:  s < steps-1,
				})
			})
		}
		p.combine = combine
	})
}

// Broadcast copies root's data into data on every other rank. All ranks
// must pass slices of the same length. The data travels round the ring in
// chunks, each rank forwarding a chunk while it receives the next.
func Broadcast[T Elem](ctx context.Context, c *Comm, data []T, root int) error {
	var zero T
	esize := int(unsafe.Sizeof(zero))
	h := header{op: opBroadcast, elemSize: uint8(esize), root: uint32(root), count: uint64(len(data)), elem: fmt.Sprintf("%T", zero)}
	if root < 0 || root >= c.world {
		return fmt.Errorf("collective: %s on rank %d: root %d out of range for world size %d", h, c.rank, root, c.world)
	}
	return c.run(ctx, h, func(p *plan) {
		b := asBytes(data)
		forward := c.rank != root && c.right != root
		chunks(0, len(b), c.chunkSize(esize), func(lo, hi int) {
			// The receive is planned first: the forwarding send of a chunk
			// depends on it, not the other way round.
			if c.rank != root {
				p.recv(b, lo, hi, recvItem{token: forward})
			}
			if c.rank == root || forward {
				p.send(b, lo, hi, c.rank != root)
			}
		})
	})
}

// AllGather concatenates every rank's send slice, in rank order, into recv
// on every rank. All ranks must pass send slices of the same length, and
// len(recv) must be WorldSize()*len(send).
func AllGather[T Elem](ctx context.Context, c *Comm, send, recv []T) error {
	var zero T
	esize := int(unsafe.Sizeof(zero))
	h := header{op: opAllGather, elemSize: uint8(esize), count: uint64(len(send)), elem: fmt.Sprintf("%T", zero)}
	if len(recv) != c.world*len(send) {
		return fmt.Errorf("collective: %s on rank %d: receive buffer holds %d elements, want %d (world size %d × %d)",
			h, c.rank, len(recv), c.world*len(send), c.world, len(send))
	}
	return c.allGather(ctx, h, asBytes(send), asBytes(recv), esize)
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier(ctx context.Context) error {
	// No rank can finish before it has heard, directly or through others,
	// from every rank after that rank entered: one byte up the tree and
	// back down, or an allgather of one byte per rank round the ring.
	h := header{op: opBarrier, elemSize: 1, count: 1}
	if c.host != nil {
		return c.do(ctx, h, func(h header) error {
			return c.hostAllReduce(ctx, h, nil, nil)
		})
	}
	if c.treeAllowed(1) {
		return c.do(ctx, h, func(h header) error {
			return c.tree(ctx, h, []byte{1}, func(_, _ []byte, _ bool) {})
		})
	}
	recv := make([]byte, c.world)
	return c.allGather(ctx, header{op: opBarrier, elemSize: 1, count: 1}, []byte{1}, recv, 1)
}

func (c *Comm) allGather(ctx context.Context, h header, send, recv []byte, esize int) error {
	return c.run(ctx, h, func(p *plan) {
		n, r, m := c.world, c.rank, len(send)
		copy(recv[r*m:(r+1)*m], send)
		size := c.chunkSize(esize)
		for s := range n - 1 {
			k := mod(r-s, n)
			chunks(k*m, (k+1)*m, size, func(lo, hi int) {
				p.send(recv, lo, hi, s > 0)
			})
			k = mod(r-s-1, n)
			chunks(k*m, (k+1)*m, size, func(lo, hi int) {
				p.recv(recv, lo, hi, recvItem{token: s < n-2})
			})
		}
	})
}

// asBytes views s's memory as bytes, without copying.
func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// fromBytes views b as elements of T, without copying. b must be aligned
// for T, which holds for views of T slices and for Comm.scratch.
func fromBytes[T Elem](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) < size {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size)
}
