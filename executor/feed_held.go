package executor

import (
	"context"
	"fmt"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
)

// Going on in place with input (docs/reliability.md, "Going on in
// place"): a survivor's running feed must serve, in the current epoch, the
// rows of a lost rank the driver dealt to it. Where the task says so
// (FeedTask.hold_epochs), its epochs are therefore held at their end until
// the driver says whether they end (Control.HoldEpoch). The driver does
// not ask for it yet.

// epochEnder asks whether the rank's epoch ends once the rank's own rows
// ran out. It answers with the rows of a lost rank dealt to this one, as
// segments of the lost rank's epoch, and the batch count to pad them to;
// with no segments the epoch ends. It may wait for the answer.
type epochEnder func(ctx context.Context, epoch int) (segs []feed.Segment, pad int64, err error)

// heldSource serves a rank's epochs from its own source, each held at its
// end until end answers, and then the rows end dealt to the rank, each
// segment read by its own rank's epoch rules (feed.SegmentEpoch).
type heldSource struct {
	wire.EpochSource
	res *fsys.Resolver
	cfg feed.PipelineConfig
	end epochEnder
}

var _ wire.EpochSource = (*heldSource)(nil)

// Epoch opens the rank's own epoch, held at its end.
func (s *heldSource) Epoch(ctx context.Context, epoch int) (feed.Reader, error) {
	r, err := s.EpochSource.Epoch(ctx, epoch)
	if err != nil {
		return nil, err
	}
	return feed.HeldEpoch(r, epoch, s.more), nil
}

// more is the next part of epoch dealt to the rank, or nil when the
// epoch ends.
func (s *heldSource) more(ctx context.Context, epoch int) (feed.Reader, error) {
	segs, pad, err := s.end(ctx, epoch)
	if err != nil || len(segs) == 0 {
		return nil, err
	}
	return feed.SegmentEpoch(ctx, s.res, s.cfg, segs, epoch, pad)
}

// driverEpochEnd is executor id's epochEnder through the driver
// (Control.HoldEpoch).
func driverEpochEnd(client driverpb.ControlClient, id string) epochEnder {
	return func(ctx context.Context, epoch int) ([]feed.Segment, int64, error) {
		resp, err := client.HoldEpoch(ctx, &driverpb.HoldEpochRequest{ExecutorId: id, Epoch: int32(epoch)})
		if err != nil {
			return nil, 0, fmt.Errorf("ask the driver whether epoch %d ends: %w", epoch, err)
		}
		return driverpb.FeedSegments(resp.GetRest()), resp.GetRestBatches(), nil
	}
}
