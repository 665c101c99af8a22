package feed

import (
	"context"
	"errors"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// prefetcher runs an epoch's chain on a goroutine of its own, keeping up
// to a number of finished batches (and, with a budget, bytes) ready for
// the consumer.
type prefetcher struct {
	ch     chan prefetched
	sem    *semaphore.Weighted // nil without a budget
	budget int64
	cancel context.CancelFunc
	done   chan struct{} // closed by stop
	g      errgroup.Group
	err    error // the chain's error; written before ch is closed
}

type prefetched struct {
	rec    arrow.RecordBatch
	charge int64 // bytes held against the budget
}

// startPrefetch starts reading in ahead of the consumer. Cancelling ctx
// or calling stop ends the goroutine.
func startPrefetch(ctx context.Context, in stage, batches int, budget int64) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	p := &prefetcher{ch: make(chan prefetched, batches), budget: budget, cancel: cancel, done: make(chan struct{})}
	if budget > 0 {
		p.sem = semaphore.NewWeighted(budget)
	}
	p.g.Go(func() error {
		p.run(ctx, in)
		return nil
	})
	return p
}

func (p *prefetcher) run(ctx context.Context, in stage) {
	defer close(p.ch)
	for {
		rec, err := in.next(ctx)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.err = err
			}
			return
		}
		var charge int64
		if p.sem != nil {
			// A batch larger than the whole budget still goes, alone.
			charge = min(BatchBytes(rec), p.budget)
			if err := p.sem.Acquire(ctx, charge); err != nil {
				rec.Release()
				p.err = err
				return
			}
		}
		select {
		case p.ch <- prefetched{rec: rec, charge: charge}:
		case <-ctx.Done():
			rec.Release()
			p.err = ctx.Err()
			return
		}
	}
}

// next hands out the next prepared batch.
func (p *prefetcher) next(ctx context.Context) (arrow.RecordBatch, error) {
	select {
	case it, ok := <-p.ch:
		if !ok {
			if p.err != nil {
				return nil, p.err
			}
			return nil, io.EOF
		}
		if p.sem != nil {
			p.sem.Release(it.charge)
		}
		return it.rec, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, ErrClosed
	}
}

// stop ends the goroutine, waits for it and releases what it prepared.
func (p *prefetcher) stop() {
	p.cancel()
	close(p.done)
	for it := range p.ch {
		it.rec.Release()
	}
	_ = p.g.Wait()
}

// BatchBytes estimates the bytes of a batch's values, counting only the
// rows a sliced batch shows.
func BatchBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for i := 0; i < int(rec.NumCols()); i++ {
		n += arrayBytes(rec.Column(i))
	}
	return n
}

func arrayBytes(a arrow.Array) int64 {
	n := int64(a.Len())
	if n == 0 {
		return 0
	}
	bitmap := (n + 7) / 8
	switch t := a.DataType().(type) {
	case arrow.FixedWidthDataType:
		return (n*int64(t.BitWidth())+7)/8 + bitmap
	}
	switch v := a.(type) {
	case *array.String:
		offs := v.ValueOffsets()
		return int64(offs[len(offs)-1]-offs[0]) + 4*n + bitmap
	case *array.Binary:
		offs := v.ValueOffsets()
		return int64(offs[len(offs)-1]-offs[0]) + 4*n + bitmap
	case *array.LargeString:
		offs := v.ValueOffsets()
		return offs[len(offs)-1] - offs[0] + 8*n + bitmap
	}
	// Anything else: the whole buffers, shared or not.
	return dataBytes(a.Data(), nil)
}

// dataBytes is the length of every buffer of d, its children and its
// dictionary. With parents (not nil), a buffer that slices another
// (memory.SliceBuffer) counts as that one's whole capacity, the first
// time: parents notes the buffers counted.
func dataBytes(d arrow.ArrayData, parents map[*memory.Buffer]bool) int64 {
	var n int64
	for _, b := range d.Buffers() {
		switch {
		case b == nil:
		case parents == nil || b.Parent() == nil:
			n += int64(b.Len())
		case !parents[b.Parent()]:
			parents[b.Parent()] = true
			n += int64(b.Parent().Cap())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c, parents)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		n += dataBytes(d.Dictionary(), parents)
	}
	return n
}
