package feed

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

// batchCutter turns a stream of batches into the split's batches: it
// skips the first skip rows and cuts what is left into batches of at most
// batchRows rows (slices, not copies). The Arrow IPC and Flight sources
// share it.
type batchCutter struct {
	skip      int64
	batchRows int64

	cur arrow.RecordBatch
	pos int64
}

// next returns the next batch, which the caller owns, reading a new one
// from read (which returns a batch the cutter owns, or io.EOF) as needed.
func (c *batchCutter) next(ctx context.Context, read func() (arrow.RecordBatch, error)) (arrow.RecordBatch, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.cur == nil {
			rec, err := read()
			if err != nil {
				return nil, err
			}
			c.cur, c.pos = rec, 0
		}
		if c.skip > 0 {
			d := min(c.skip, c.cur.NumRows()-c.pos)
			c.pos += d
			c.skip -= d
		}
		n := c.cur.NumRows()
		if c.pos >= n {
			c.cur.Release()
			c.cur = nil
			continue
		}
		if c.pos == 0 && n <= c.batchRows {
			rec := c.cur
			c.cur = nil
			return rec, nil
		}
		end := min(n, c.pos+c.batchRows)
		rec := c.cur.NewSlice(c.pos, end)
		c.pos = end
		return rec, nil
	}
}

// release drops the batch being cut.
func (c *batchCutter) release() {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
}
