package feed

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/fsys"
)

// Segment is a slice of another rank's epoch: rows [RowStart, RowEnd) of
// the rows that rank Rank, holding Splits, yields in an epoch under the
// epoch rules (with its TargetBatches and EpochRows). When a job's world
// changes size inside an epoch, the rest of the epoch is dealt to the new
// ranks as segments of the old ranks' epochs, so that no row is fed twice
// or skipped.
type Segment struct {
	Splits        []Split
	Rank          int
	TargetBatches int64
	EpochRows     int64
	RowStart      int64
	RowEnd        int64
}

// Rows returns the rows the segment holds.
func (s Segment) Rows() int64 { return s.RowEnd - s.RowStart }

// SegmentEpoch reads epoch epoch as the concatenation of segs, cut into
// batches of base.BatchRows, each segment read by the epoch rules of its
// own rank with base's other settings (seed, shuffle, even batches,
// columns). With padBatches above the batches the segments fill, the
// epoch is padded to that many by repeating its first batch (the even
// batch rules' padding); an epoch with no rows then repeats nothing and
// stays short.
func SegmentEpoch(ctx context.Context, res *fsys.Resolver, base PipelineConfig, segs []Segment, epoch int, padBatches int64) (Reader, error) {
	if base.Schema == nil {
		return nil, errors.New("segment epoch: no schema")
	}
	for i, s := range segs {
		if s.RowStart < 0 || s.RowEnd < s.RowStart {
			return nil, fmt.Errorf("segment epoch: segment %d has rows %d..%d", i, s.RowStart, s.RowEnd)
		}
	}
	alloc := base.Allocator
	if alloc == nil {
		alloc = memory.DefaultAllocator
	}
	src := &segmentStage{ctx: ctx, res: res, base: base, segs: segs, epoch: epoch}
	schema := base.readOptions().outSchema(base.Schema)
	chain := newRebatcher(src, schema, int64(base.BatchRows), NewBatchAllocator(base.BatchMemory, alloc))
	return &stageReader{schema: schema, chain: chain, pad: padBatches}, nil
}

// segmentStage yields the rows of each segment in turn.
type segmentStage struct {
	ctx   context.Context
	res   *fsys.Resolver
	base  PipelineConfig
	segs  []Segment
	epoch int

	i    int
	pipe *Pipeline
	cur  Reader
	pos  int64 // rows of the current segment's rank epoch read so far
}

func (s *segmentStage) open(ctx context.Context) error {
	seg := s.segs[s.i]
	cfg := s.base
	cfg.Splits, cfg.Rank, cfg.TargetBatches, cfg.EpochRows = seg.Splits, seg.Rank, seg.TargetBatches, seg.EpochRows
	cfg.Prefetch, cfg.CacheBytes = 0, 0
	p, err := NewPipeline(s.res, cfg)
	if err != nil {
		return fmt.Errorf("segment %d (rank %d rows %d..%d): %w", s.i, seg.Rank, seg.RowStart, seg.RowEnd, err)
	}
	r, err := p.Epoch(ctx, s.epoch)
	if err != nil {
		p.Close()
		return err
	}
	s.pipe, s.cur, s.pos = p, r, 0
	return nil
}

func (s *segmentStage) closeCur() error {
	if s.cur == nil {
		return nil
	}
	err := s.cur.Close()
	s.pipe.Close()
	s.cur, s.pipe = nil, nil
	return err
}

func (s *segmentStage) next(ctx context.Context) (arrow.RecordBatch, error) {
	for {
		if s.i >= len(s.segs) {
			return nil, io.EOF
		}
		seg := s.segs[s.i]
		if seg.Rows() == 0 || (s.cur != nil && s.pos >= seg.RowEnd) {
			if err := s.closeCur(); err != nil {
				return nil, err
			}
			s.i++
			continue
		}
		if s.cur == nil {
			if err := s.open(ctx); err != nil {
				return nil, err
			}
		}
		rec, err := s.cur.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("segment %d: rank %d's epoch %d ends at row %d, before the segment's end %d", s.i, seg.Rank, s.epoch, s.pos, seg.RowEnd)
		}
		if err != nil {
			return nil, err
		}
		n := rec.NumRows()
		from, to := max(seg.RowStart-s.pos, 0), min(seg.RowEnd-s.pos, n)
		s.pos += n
		if from >= to {
			rec.Release()
			continue
		}
		if from == 0 && to == n {
			return rec, nil
		}
		cut := rec.NewSlice(from, to)
		rec.Release()
		return cut, nil
	}
}

func (s *segmentStage) close() error { return s.closeCur() }

// stageReader hands out a chain's batches as a Reader, padding to pad
// batches with copies of the first.
type stageReader struct {
	schema *arrow.Schema
	chain  stage
	pad    int64
	n      int64
	first  arrow.RecordBatch
	eof    bool
}

func (r *stageReader) Schema() *arrow.Schema { return r.schema }

func (r *stageReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if !r.eof {
		rec, err := r.chain.next(ctx)
		switch {
		case err == nil:
			if r.first == nil {
				rec.Retain()
				r.first = rec
			}
			r.n++
			return rec, nil
		case !errors.Is(err, io.EOF):
			return nil, err
		}
		r.eof = true
	}
	if r.n >= r.pad || r.first == nil {
		return nil, io.EOF
	}
	r.n++
	r.first.Retain()
	return r.first, nil
}

func (r *stageReader) Close() error {
	if r.first != nil {
		r.first.Release()
		r.first = nil
	}
	return r.chain.close()
}
