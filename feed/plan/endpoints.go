package plan

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"
)

// uncounted reports whether any planned entry's rows are unknown: an
// endpoint of a flight that does not say how many rows each endpoint
// holds, left unread (PlanRequest.DealEndpoints).
func uncounted(infos []*fileInfo) bool {
	for _, f := range infos {
		if f.rows < 0 {
			return true
		}
	}
	return false
}

// dealEndpoints plans Flight endpoints whose rows are not all known: each
// rank gets a contiguous run of whole endpoints, in flight order, the
// runs differing by at most one endpoint, so that every endpoint is
// fetched by one rank only and nothing is read while planning. Row counts
// are unknown: the plan's and its splits' are zero, and a split is read
// to its stream's end.
func dealEndpoints(schema *arrow.Schema, infos []*fileInfo, ranks int) (*feed.JobPlan, error) {
	if len(infos) < ranks {
		return nil, fmt.Errorf("%w: the Flight inputs have %d endpoints, fewer than the %d ranks: a flight that does not "+
			"say each endpoint's rows is dealt as whole endpoints (every rank needs at least one); use fewer executors", feed.ErrInput, len(infos), ranks)
	}
	plan := &feed.JobPlan{Schema: schema, Ranks: make([][]feed.Split, ranks), RowsPerRank: make([]int64, ranks), RowsUnknown: true}
	for _, f := range infos {
		plan.Files = append(plan.Files, feed.PlannedFile{URI: f.uri, Format: f.format, Rows: max(f.rows, 0), Units: 1})
	}
	base, extra := len(infos)/ranks, len(infos)%ranks
	next := 0
	for r := range ranks {
		n := base
		if r < extra {
			n++
		}
		for _, f := range infos[next : next+n] {
			plan.Ranks[r] = append(plan.Ranks[r], feed.Split{URI: f.uri, Format: f.format, Ticket: f.ticket, Hosts: f.hosts})
		}
		next += n
	}
	return plan, nil
}
