package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// RowAgreement is how the ranks of a job whose splits' rows were not
// known at planning (a flight's endpoints dealt unread) agree on the
// batches each feeds per epoch under EvenPad or EvenDrop: each rank
// reports the rows it counted, and learns every rank's.
type RowAgreement interface {
	// AgreeRows reports this rank's rows and returns every rank's, by
	// rank, once all have reported.
	AgreeRows(ctx context.Context, rows int64) ([]int64, error)
}

// agreement is a pipeline's one-time settling of its epoch's rows through
// a RowAgreement (PipelineConfig.Agree).
type agreement struct {
	with RowAgreement
	// turn is held by the one settling; settled and err are its outcome.
	turn    chan struct{}
	settled bool
	err     error
}

// Settle counts the rank's rows, reading every split once in full into
// the cache (and spill), and agrees with the other ranks through
// PipelineConfig.Agree on the rows each epoch yields; Epoch does it
// itself before the first batch. Calling it as soon as the pipeline is
// built lets the other ranks go on without waiting for this rank's first
// epoch. It does nothing for a pipeline without Agree; a failure other
// than ctx's is kept and returned again.
func (p *Pipeline) Settle(ctx context.Context) error {
	a := p.agree
	if a == nil {
		return nil
	}
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-a.turn }()
	if a.settled {
		return a.err
	}
	err := p.settle(ctx, a.with)
	if err != nil && ctx.Err() != nil {
		return err // tried again by the next caller
	}
	a.settled, a.err = true, err
	return err
}

// settle counts, agrees and sets the epoch's row limit (Settle).
func (p *Pipeline) settle(ctx context.Context, with RowAgreement) error {
	c := p.cfg
	rows, err := p.countRows(ctx)
	if err != nil {
		return fmt.Errorf("count rank %d's rows: %w", c.Rank, err)
	}
	all, err := with.AgreeRows(ctx, rows)
	if err != nil {
		return fmt.Errorf("agree on the batches per epoch with the other ranks: %w", err)
	}
	if c.Rank >= len(all) || all[c.Rank] != rows {
		return fmt.Errorf("agree on the batches per epoch: rank %d counted %d rows, the agreement says otherwise (%v)", c.Rank, rows, all)
	}
	if err := CheckEven(all, c.BatchRows, c.EvenBatches); err != nil {
		return err
	}
	target := EvenTarget(all, c.BatchRows, c.EvenBatches)
	p.rows = rows
	p.limit = EpochRowLimit(rows, c.BatchRows, c.EvenBatches, target, EvenRows(all, c.Rank, c.BatchRows, c.EvenBatches))
	return nil
}

// countRows reads each of the rank's splits to its end and returns their
// rows. Through the cache, so that the first epoch serves what fits from
// there rather than reading it again.
func (p *Pipeline) countRows(ctx context.Context) (int64, error) {
	var rows int64
	for i := range p.cfg.Splits {
		r, err := p.openSplit(ctx, i)
		if err != nil {
			return 0, err
		}
		for {
			rec, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Close()
				return 0, err
			}
			rows += rec.NumRows()
			rec.Release()
		}
		if err := r.Close(); err != nil {
			return 0, err
		}
	}
	return rows, nil
}

// RowTally collects every rank's rows for a RowAgreement: the driver
// keeps one per job and answers its executors from it, and Rank serves
// ranks in the same process. A rank that reports again (its process run
// again) keeps the rows it first reported: the deal has not changed.
type RowTally struct {
	mu    sync.Mutex
	rows  []int64
	known []bool
	left  int
	done  chan struct{}
}

// NewRowTally returns a tally of ranks ranks.
func NewRowTally(ranks int) *RowTally {
	return &RowTally{rows: make([]int64, ranks), known: make([]bool, ranks), left: ranks, done: make(chan struct{})}
}

// Report records rank's rows.
func (t *RowTally) Report(rank int, rows int64) error {
	if rows < 0 {
		return fmt.Errorf("rank %d reported %d rows", rank, rows)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if rank < 0 || rank >= len(t.rows) {
		return fmt.Errorf("rank %d reported its rows: no such rank among %d", rank, len(t.rows))
	}
	if t.known[rank] {
		return nil
	}
	t.rows[rank], t.known[rank] = rows, true
	if t.left--; t.left == 0 {
		close(t.done)
	}
	return nil
}

// Done is closed once every rank has reported.
func (t *RowTally) Done() <-chan struct{} { return t.done }

// Rows returns every rank's rows, by rank; call it once Done is closed.
func (t *RowTally) Rows() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.rows)
}

// Rank returns rank's agreement through the tally.
func (t *RowTally) Rank(rank int) RowAgreement { return tallyRank{t, rank} }

type tallyRank struct {
	t    *RowTally
	rank int
}

func (r tallyRank) AgreeRows(ctx context.Context, rows int64) ([]int64, error) {
	if err := r.t.Report(r.rank, rows); err != nil {
		return nil, err
	}
	select {
	case <-r.t.done:
		return r.t.Rows(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
