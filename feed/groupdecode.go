package feed

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// batchReader reads some of a split's columns, a batch of the same rows
// at a time: a pqarrow.RecordReader, or a feedpq.FlatColumns.
type batchReader interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
	SeekToRow(row int64) error
	Schema() *arrow.Schema
	Release()
}

// columnGroup is a reader over some of a split's columns, and its
// batches decoded but not yet joined.
type columnGroup struct {
	rr batchReader
	at []int // at[k] is the output column of the reader's column k

	// Guarded by the groupDecoder's mu.
	decoded []arrow.RecordBatch // retained, oldest first
	busy    bool                // a goroutine is in rr.Next
	ended   bool                // rr.Next said false
	err     error               // rr.Err when it did
	// cost is a moving average of the time its batches took to decode:
	// of two groups equally far ahead, the costlier is decoded first, so
	// that what decodes last is short and decoders finish together.
	// (Decoded bytes are a poor guide: a dictionary-encoded string
	// column has few and costs as much as four float columns.)
	cost time.Duration
}

// decodeAhead is the most batches a column group decodes ahead of the
// batch being joined. With one, a group's next batch could start only
// once every group had decoded the current one, and the decoders would
// wait for the costliest group at every batch; with two they go on to
// the next batch's groups meanwhile (four measured no better).
const decodeAhead = 2

// groupDecoder decodes the column groups of a split's batches, on the
// reading goroutine and on helper goroutines together. Each takes the
// group furthest behind that nobody is decoding (the costliest of
// those), decodes its next batch and queues it; the reading goroutine
// joins a batch when every group has one. Helpers decode ahead, up to
// decodeAhead batches per group, while the batch before is consumed.
type groupDecoder struct {
	groups  []*columnGroup
	helpers int // goroutines started beside the reading one

	mu       sync.Mutex
	changed  *sync.Cond // a decode ended, a batch was joined, or stopping
	stopping bool
	running  sync.WaitGroup // the helpers
}

// start starts helpers goroutines beside the reading one, when there is
// more than one group to share among them.
func (d *groupDecoder) start(helpers int) {
	d.changed = sync.NewCond(&d.mu)
	if len(d.groups) < 2 {
		return
	}
	d.helpers = helpers
	for range helpers {
		d.running.Add(1)
		go func() {
			defer d.running.Done()
			d.help()
		}()
	}
}

// help decodes groups until the decoder stops.
func (d *groupDecoder) help() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for !d.stopping {
		if g := d.nextGroup(); g != nil {
			d.decode(g)
			continue
		}
		d.changed.Wait()
	}
}

// nextGroup returns the group to decode next, or nil when each is busy,
// ended or decodeAhead batches ahead. Called with mu held.
func (d *groupDecoder) nextGroup() *columnGroup {
	var best *columnGroup
	for _, g := range d.groups {
		if g.busy || g.ended || len(g.decoded) >= decodeAhead {
			continue
		}
		if best == nil || len(g.decoded) < len(best.decoded) || (len(g.decoded) == len(best.decoded) && g.cost > best.cost) {
			best = g
		}
	}
	return best
}

// decode decodes g's next batch, with mu released meanwhile. Called
// with mu held.
func (d *groupDecoder) decode(g *columnGroup) {
	g.busy = true
	d.mu.Unlock()
	start := time.Now()
	var rec arrow.RecordBatch
	var err error
	ok := g.rr.Next()
	if ok {
		rec = g.rr.RecordBatch()
		rec.Retain()
	} else {
		err = g.rr.Err()
	}
	took := time.Since(start)
	d.mu.Lock()
	g.busy = false
	g.cost += (took - g.cost) / 4
	if ok {
		g.decoded = append(g.decoded, rec)
	} else {
		g.ended, g.err = true, err
	}
	d.changed.Broadcast()
}

// read returns the next batch of every group joined into one of schema,
// or io.EOF after the last. uri names the file in errors.
func (d *groupDecoder) read(ctx context.Context, uri string, schema *arrow.Schema) (arrow.RecordBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		ready, ended := 0, 0
		for _, g := range d.groups {
			switch {
			case len(g.decoded) > 0:
				ready++
			case g.ended && g.err != nil:
				return nil, fmt.Errorf("read %s: %w", uri, g.err)
			case g.ended:
				ended++
			}
		}
		switch {
		case ready == len(d.groups):
			return d.join(uri, schema)
		case ended == len(d.groups):
			return nil, io.EOF
		case ended > 0 && ready+ended == len(d.groups):
			return nil, fmt.Errorf("%w: %s: some columns ended before others", ErrInput, uri)
		}
		if g := d.nextGroup(); g != nil {
			d.decode(g)
			continue
		}
		d.changed.Wait()
	}
}

// join takes the oldest decoded batch of every group and joins them.
// Called with mu held.
func (d *groupDecoder) join(uri string, schema *arrow.Schema) (arrow.RecordBatch, error) {
	recs := make([]arrow.RecordBatch, len(d.groups))
	for i, g := range d.groups {
		recs[i] = g.decoded[0]
		g.decoded[0] = nil
		g.decoded = g.decoded[1:]
	}
	d.changed.Broadcast()
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	rows := recs[0].NumRows()
	cols := make([]arrow.Array, schema.NumFields())
	for i, g := range d.groups {
		if recs[i].NumRows() != rows {
			return nil, fmt.Errorf("%w: %s: columns decoded %d and %d rows for the same batch", ErrInput, uri, rows, recs[i].NumRows())
		}
		for k, j := range g.at {
			cols[j] = recs[i].Column(k)
		}
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// release stops the helpers and frees the groups and their batches.
func (d *groupDecoder) release() {
	if d.changed != nil {
		d.mu.Lock()
		d.stopping = true
		d.changed.Broadcast()
		d.mu.Unlock()
		d.running.Wait()
	}
	for _, g := range d.groups {
		for _, rec := range g.decoded {
			rec.Release()
		}
		g.decoded = nil
		g.rr.Release()
	}
	d.groups = nil
}
