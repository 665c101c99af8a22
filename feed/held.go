package feed

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
)

// More answers, once a rank's epoch has run out, with more of the epoch
// to serve before it ends (the rows of a lost rank dealt to this one), or
// with nil when the epoch ends. It may wait for the answer.
type More func(ctx context.Context, epoch int) (Reader, error)

// HeldEpoch reads epoch epoch from r and, when r runs out, does not end
// the epoch until more says so: it serves each reader more gives in turn
// and asks again after it. A feed server reading it writes no epoch end
// while more has not answered, so that rows dealt to the rank while the
// epoch runs (a world that shrank in place) are fed in the same epoch.
// It takes r; Close closes the reader being read.
func HeldEpoch(r Reader, epoch int, more More) Reader {
	return &heldEpoch{schema: r.Schema(), cur: r, epoch: epoch, more: more}
}

type heldEpoch struct {
	schema *arrow.Schema
	cur    Reader
	epoch  int
	more   More
	ended  bool
	// taken, when set, waits until the consumer has taken every batch
	// sent, before more is asked.
	taken func(ctx context.Context) error
}

// AskAfterTaken makes the epoch, each time what it was serving runs out,
// wait for taken (the training process has asked for the batch after
// the last one sent) before it asks whether the epoch ends. A feed
// server that can see its consumer's position sets it, so that an epoch
// ends only once every process trained it (read-ahead and shared memory
// let a feed reach its epoch's end long before that), and a rank lost
// inside the epoch can still have its rest served in it.
func (h *heldEpoch) AskAfterTaken(taken func(ctx context.Context) error) { h.taken = taken }

func (h *heldEpoch) Schema() *arrow.Schema { return h.schema }

func (h *heldEpoch) Next(ctx context.Context) (arrow.RecordBatch, error) {
	for {
		if h.cur != nil {
			rec, err := h.cur.Next(ctx)
			if !errors.Is(err, io.EOF) {
				return rec, err
			}
			err = h.cur.Close()
			h.cur = nil
			if err != nil {
				return nil, fmt.Errorf("close part of epoch %d: %w", h.epoch, err)
			}
		}
		if h.ended {
			return nil, io.EOF
		}
		if h.taken != nil {
			if err := h.taken(ctx); err != nil {
				return nil, fmt.Errorf("wait for the training process to take epoch %d: %w", h.epoch, err)
			}
		}
		next, err := h.more(ctx, h.epoch)
		if err != nil {
			return nil, fmt.Errorf("ask whether epoch %d ends: %w", h.epoch, err)
		}
		if next == nil {
			h.ended = true
			return nil, io.EOF
		}
		h.cur = next
	}
}

// Buffered is the read-ahead of the part being read, so that a feed
// server sends what it queued before it waits for more.
func (h *heldEpoch) Buffered() int {
	if b, ok := h.cur.(interface{ Buffered() int }); ok {
		return b.Buffered()
	}
	return 0
}

func (h *heldEpoch) Close() error {
	if h.cur == nil {
		return nil
	}
	err := h.cur.Close()
	h.cur = nil
	return err
}
