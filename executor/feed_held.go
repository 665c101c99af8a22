package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
)

// Going on in place with input (docs/reliability.md, "Going on in
// place"): a survivor's running feed must serve, in the current epoch, the
// rows of a lost rank the driver dealt to it, and later epochs from the
// smaller world's plan. Where the task says so (FeedTask.hold_epochs), its
// epochs are therefore held at their end until the driver says whether
// they end (Control.HoldEpoch).

// heldAnswer is the driver's answer to a held epoch end: rows of a lost
// rank dealt to this one, as segments of the lost rank's epoch, and the
// batch count to pad them to (no segments: the epoch ends); and, when
// set, the rank's share of the plan its later epochs follow.
type heldAnswer struct {
	segs []feed.Segment
	pad  int64
	next *driverpb.FeedPlan
	// membership, when set, is the bigger world the process grows into
	// before the next epoch (growing in place with input).
	membership *driverpb.Membership
}

// epochEnder asks whether the rank's epoch ends once the rank's own rows
// ran out. It may wait for the answer.
type epochEnder func(ctx context.Context, epoch int) (heldAnswer, error)

// heldSource serves a rank's epochs from its own source, each held at its
// end until end answers, and then the rows end dealt to the rank, each
// segment read by its own rank's epoch rules (feed.SegmentEpoch). An
// answer with a new plan opens a pipeline on it for the epochs after.
type heldSource struct {
	wire.EpochSource
	res *fsys.Resolver
	cfg feed.PipelineConfig
	end epochEnder
	// follow hands the process a membership before the epoch ends, so
	// that it knows of a bigger world when it sees the end; nil without
	// a membership file.
	follow func(*driverpb.Membership) error
	// forProcess makes each epoch's end wait for the process to ask
	// beyond its last batch, where the feed server can tell
	// (FeedTask.hold_for_process), until a lost rank's rest is dealt to
	// the rank (dealt): no second deal follows in the generation, and the
	// ranks' batch counts may differ after it.
	forProcess bool
	dealt      atomic.Bool

	mu sync.Mutex
	// replanned are the pipelines opened on new plans, the last serving
	// the epochs from from on; closed by Close.
	replanned []*feed.Pipeline
	from      int
}

var _ wire.EpochSource = (*heldSource)(nil)

// Epoch opens the rank's epoch, from the newest plan it follows, held at
// its end.
func (s *heldSource) Epoch(ctx context.Context, epoch int) (feed.Reader, error) {
	src := s.EpochSource
	s.mu.Lock()
	if n := len(s.replanned); n > 0 && epoch >= s.from {
		src = s.replanned[n-1]
	}
	s.mu.Unlock()
	r, err := src.Epoch(ctx, epoch)
	if err != nil {
		return nil, err
	}
	h := feed.HeldEpoch(r, epoch, s.more)
	if !s.forProcess {
		return endsAtItsRows{h}, nil
	}
	return &untilDealt{Reader: h, dealt: &s.dealt}, nil
}

// endsAtItsRows is a held epoch that asks whether it ends as soon as its
// rows run out, not waiting for the process.
type endsAtItsRows struct{ feed.Reader }

// Buffered passes on the epoch's read-ahead.
func (r endsAtItsRows) Buffered() int { return buffered(r.Reader) }

// untilDealt is a held epoch that waits for its process before it asks
// whether it ends, until the rank was dealt a lost rank's rest.
type untilDealt struct {
	feed.Reader
	dealt *atomic.Bool
}

// Buffered passes on the epoch's read-ahead.
func (r *untilDealt) Buffered() int { return buffered(r.Reader) }

// AskAfterTaken passes taken on to the held epoch, skipped once dealt.
func (r *untilDealt) AskAfterTaken(taken func(ctx context.Context) error) {
	h, ok := r.Reader.(interface {
		AskAfterTaken(func(ctx context.Context) error)
	})
	if !ok {
		return
	}
	h.AskAfterTaken(func(ctx context.Context) error {
		if r.dealt.Load() {
			return nil
		}
		return taken(ctx)
	})
}

// buffered is r's read-ahead, when it tells.
func buffered(r feed.Reader) int {
	if b, ok := r.(interface{ Buffered() int }); ok {
		return b.Buffered()
	}
	return 0
}

// more is the next part of epoch dealt to the rank, or nil when the
// epoch ends.
func (s *heldSource) more(ctx context.Context, epoch int) (feed.Reader, error) {
	a, err := s.end(ctx, epoch)
	if err != nil {
		return nil, err
	}
	if len(a.segs) > 0 || a.next != nil {
		s.dealt.Store(true)
	}
	if a.next != nil {
		if err := s.replan(a.next, epoch+1); err != nil {
			return nil, err
		}
	}
	if a.membership != nil && s.follow != nil {
		if err := s.follow(a.membership); err != nil {
			return nil, fmt.Errorf("hand the process the bigger world before epoch %d ends: %w", epoch, err)
		}
	}
	if len(a.segs) == 0 {
		return nil, nil
	}
	return feed.SegmentEpoch(ctx, s.res, s.cfg, a.segs, epoch, a.pad)
}

// replan opens a pipeline on plan for the epochs from from on.
func (s *heldSource) replan(plan *driverpb.FeedPlan, from int) error {
	cfg := s.cfg
	cfg.Splits, cfg.Rank = driverpb.FeedSplits(plan.GetSplits()), int(plan.GetRank())
	cfg.TargetBatches, cfg.EpochRows = plan.GetTargetBatches(), plan.GetEpochRows()
	p, err := feed.NewPipeline(s.res, cfg)
	if err != nil {
		return fmt.Errorf("open the feed on the smaller world's plan: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replanned, s.from = append(s.replanned, p), from
	return nil
}

// Close closes the pipelines opened on new plans; the rank's own source
// is its owner's to close.
func (s *heldSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, p := range s.replanned {
		errs = append(errs, p.Close())
	}
	s.replanned = nil
	return errors.Join(errs...)
}

// driverEpochEnd is executor id's epochEnder through the driver
// (Control.HoldEpoch).
func driverEpochEnd(client driverpb.ControlClient, id string) epochEnder {
	return func(ctx context.Context, epoch int) (heldAnswer, error) {
		resp, err := client.HoldEpoch(ctx, &driverpb.HoldEpochRequest{ExecutorId: id, Epoch: int32(epoch)})
		if err != nil {
			return heldAnswer{}, fmt.Errorf("ask the driver whether epoch %d ends: %w", epoch, err)
		}
		return heldAnswer{segs: driverpb.FeedSegments(resp.GetRest()), pad: resp.GetRestBatches(), next: resp.GetNext(),
			membership: resp.GetMembership()}, nil
	}
}
