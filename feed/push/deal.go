package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"
)

// errInputEnded refuses batches pushed after the input ended.
var errInputEnded = errors.New("the job's pushed input has ended (end-of-input, or its declared row count was reached)")

// pushPiece is a run of rows waiting in the dealer: a batch or a slice of
// one, and the bytes it stands for.
type pushPiece struct {
	rec   arrow.RecordBatch
	bytes int64
}

// pushDealer deals pushed batches to ranks in rounds: once it holds a
// batch of batchRows rows for every rank it cuts one for each (slices,
// not copies) and queues them for the ranks' streams. When the input ends
// it deals what is left per the even-batches mode, so that every rank
// yields the same number of batches (pad, drop) or ranks differ by at
// most one row (off).
//
// Producers wait (add blocks) while the queued rows, dealt but not yet
// sent to their ranks, take limit bytes or more: a producer faster than
// training is slowed, and the driver holds at most limit bytes of queued
// rows, plus fewer than one round of undealt rows, plus the batches that
// producers were adding when the limit was reached.
type pushDealer struct {
	ranks     int
	batchRows int64
	even      feed.EvenMode
	limit     int64

	mu       sync.Mutex
	wake     chan struct{} // closed and replaced on every change
	pending  []pushPiece   // undealt, in arrival order
	pendRows int64
	pendB    int64
	queues   [][]pushPiece
	queuedB  int64
	peak     int64               // the most bytes held at once (pending and queued)
	first    []arrow.RecordBatch // each rank's first row, to pad with
	rows     int64               // rows accepted
	batches  int64               // batches accepted
	bytes    int64               // bytes accepted
	waited   time.Duration       // producers' time waiting for room (backpressure), all together
	fed      []int64
	// gone are the ranks that left (leave): their rows are dropped.
	gone   []bool
	ended  bool
	closed bool
}

func newPushDealer(ranks, batchRows int, even feed.EvenMode, limit int64) *pushDealer {
	return &pushDealer{ranks: ranks, batchRows: int64(batchRows), even: even, limit: limit,
		wake: make(chan struct{}), queues: make([][]pushPiece, ranks), first: make([]arrow.RecordBatch, ranks), fed: make([]int64, ranks),
		gone: make([]bool, ranks)}
}

// changed wakes every waiter; d.mu is held.
func (d *pushDealer) changed() {
	close(d.wake)
	d.wake = make(chan struct{})
	d.peak = max(d.peak, d.pendB+d.queuedB)
}

// wait releases d.mu until the next change or ctx's end, and takes it
// again.
func (d *pushDealer) wait(ctx context.Context) error {
	w := d.wake
	d.mu.Unlock()
	defer d.mu.Lock()
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add takes one batch, which it owns from then on, waiting while the
// queues are full. With a declared row count (want > 0) a batch that
// would go past it is refused, and the batch that reaches it ends the
// input.
func (d *pushDealer) add(ctx context.Context, rec arrow.RecordBatch, want int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.queuedB >= d.limit && !d.ended && !d.closed {
		start := time.Now()
		for d.queuedB >= d.limit && !d.ended && !d.closed {
			if err := d.wait(ctx); err != nil {
				d.waited += time.Since(start)
				rec.Release()
				return err
			}
		}
		d.waited += time.Since(start)
	}
	n := rec.NumRows()
	switch {
	case d.ended || d.closed:
		rec.Release()
		return errInputEnded
	case want > 0 && d.rows+n > want:
		rec.Release()
		return fmt.Errorf("a batch of %d rows would take the job past its declared %d rows (%d accepted so far)", n, want, d.rows)
	case n == 0:
		rec.Release()
		return nil
	}
	d.pending = append(d.pending, pushPiece{rec: rec, bytes: feed.BatchBytes(rec)})
	d.pendRows += n
	d.pendB += d.pending[len(d.pending)-1].bytes
	d.rows += n
	d.batches++
	d.bytes += d.pending[len(d.pending)-1].bytes
	round := d.batchRows * int64(d.ranks)
	for d.pendRows >= round {
		for r := range d.ranks {
			d.give(r, d.cut(d.batchRows))
		}
	}
	if want > 0 && d.rows == want {
		d.endLocked()
	}
	d.changed()
	return nil
}

// cut takes the first n rows of pending (n ≤ pendRows) as pieces.
func (d *pushDealer) cut(n int64) []pushPiece {
	var out []pushPiece
	for n > 0 {
		p := d.pending[0]
		rows := p.rec.NumRows()
		if rows <= n {
			out = append(out, p)
			d.pending = d.pending[1:]
			d.pendRows -= rows
			d.pendB -= p.bytes
			n -= rows
			continue
		}
		b := p.bytes * n / rows
		out = append(out, pushPiece{rec: p.rec.NewSlice(0, n), bytes: b})
		rest := p.rec.NewSlice(n, rows)
		p.rec.Release()
		d.pending[0] = pushPiece{rec: rest, bytes: p.bytes - b}
		d.pendRows -= n
		d.pendB -= b
		n = 0
	}
	return out
}

// give queues pieces for rank r.
func (d *pushDealer) give(r int, pieces []pushPiece) {
	for _, p := range pieces {
		if d.gone[r] {
			p.rec.Release()
			continue
		}
		if d.first[r] == nil && p.rec.NumRows() > 0 {
			d.first[r] = p.rec.NewSlice(0, 1)
		}
		d.queues[r] = append(d.queues[r], p)
		d.queuedB += p.bytes
		d.fed[r] += p.rec.NumRows()
	}
}

// end ends the input: what is left is dealt, and the ranks' streams end
// once their queues are empty. Ending twice is harmless.
func (d *pushDealer) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.endLocked()
	d.changed()
}

// endLocked deals the rows left over, fewer than a round: under EvenOff
// as evenly as rows allow; under EvenPad likewise, and when that leaves
// some ranks a batch short (fewer rows left than ranks) they get one row
// repeated from their own (or, for a rank that got none, from the first
// rank's); under EvenDrop they are dropped, every rank ending on a full
// batch.
func (d *pushDealer) endLocked() {
	if d.ended {
		return
	}
	d.ended = true
	left := d.pendRows
	if left == 0 {
		return
	}
	if d.even == feed.EvenDrop {
		for _, p := range d.pending {
			p.rec.Release()
		}
		d.pending, d.pendRows, d.pendB = nil, 0, 0
		return
	}
	q, extra := left/int64(d.ranks), left%int64(d.ranks)
	for r := range d.ranks {
		n := q
		if int64(r) < extra {
			n++
		}
		if n > 0 {
			d.give(r, d.cut(n))
		}
	}
	if d.even == feed.EvenPad && q == 0 {
		for r := int(extra); r < d.ranks; r++ {
			src := d.first[r]
			if src == nil {
				src = d.first[0]
			}
			src.Retain()
			d.give(r, []pushPiece{{rec: src, bytes: feed.BatchBytes(src)}})
		}
	}
}

// take returns rank r's next batch, waiting for one, or io.EOF once the
// input has ended and the rank has had all of its rows.
func (d *pushDealer) take(ctx context.Context, r int) (arrow.RecordBatch, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.queues[r]) == 0 {
		if d.closed || d.gone[r] {
			return nil, feed.ErrClosed
		}
		if d.ended {
			return nil, io.EOF
		}
		if err := d.wait(ctx); err != nil {
			return nil, err
		}
	}
	p := d.queues[r][0]
	d.queues[r][0] = pushPiece{}
	d.queues[r] = d.queues[r][1:]
	d.queuedB -= p.bytes
	d.changed()
	return p.rec, nil
}

// leave drops rank r's queued rows and every row dealt to it from now
// on (the rank went on to a later turn): they no longer hold producers
// back. Its stream, if still open, ends.
func (d *pushDealer) leave(r int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.gone[r] {
		return
	}
	d.gone[r] = true
	for _, p := range d.queues[r] {
		d.queuedB -= p.bytes
		p.rec.Release()
	}
	d.queues[r] = nil
	d.changed()
}

// close releases every batch held and ends every wait.
func (d *pushDealer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	for _, p := range d.pending {
		p.rec.Release()
	}
	for _, q := range d.queues {
		for _, p := range q {
			p.rec.Release()
		}
	}
	for _, f := range d.first {
		if f != nil {
			f.Release()
		}
	}
	d.pending, d.queues, d.first = nil, make([][]pushPiece, d.ranks), make([]arrow.RecordBatch, d.ranks)
	d.pendB, d.queuedB = 0, 0
	d.changed()
}
