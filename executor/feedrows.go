package executor

import (
	"context"
	"fmt"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
)

// driverRows is a worker's feed.RowAgreement through the driver
// (Control.FeedRows).
type driverRows struct {
	client driverpb.ControlClient
	id     string
}

var _ feed.RowAgreement = driverRows{}

// agreeThroughDriver returns the rank's agreement on its batches per
// epoch when its task asks for one (FeedTask.agree_rows), else nil.
func agreeThroughDriver(f *FeedTask, client driverpb.ControlClient, id string) feed.RowAgreement {
	if !f.GetAgreeRows() {
		return nil
	}
	return driverRows{client: client, id: id}
}

func (d driverRows) AgreeRows(ctx context.Context, rows int64) ([]int64, error) {
	resp, err := d.client.FeedRows(ctx, &driverpb.FeedRowsRequest{ExecutorId: d.id, Rows: rows})
	if err != nil {
		return nil, fmt.Errorf("report this rank's %d rows to the driver: %w", rows, err)
	}
	return resp.GetRowsPerRank(), nil
}
