package driver

import (
	"context"
	"fmt"
	"time"
)

// Progress goes to the cluster manager at most every progressEvery, and
// only when it moved by progressStep or more (or reached the end).
const (
	progressEvery = 2 * time.Second
	progressStep  = 0.01
)

// clusterProgress passes a job's progress to a cluster manager that
// shows it: the rows training processes took off their feeds, out of the
// rows the job feeds over every epoch and rank.
type clusterProgress struct {
	to     ProgressReporter // nil: the cluster manager shows none
	expect int64            // 0: no feed, so no measure of progress
	last   float64
	at     time.Time
}

func newClusterProgress(cm ClusterManager, expect int64) *clusterProgress {
	to, _ := cm.(ProgressReporter)
	return &clusterProgress{to: to, expect: expect}
}

// update reports the share of the rows taken in ranks, when it is due.
// A cluster manager that cannot be told is not worth failing a job for:
// its error is returned for the log.
func (p *clusterProgress) update(ctx context.Context, now time.Time, ranks []rankProgress) error {
	if p.to == nil || p.expect <= 0 || now.Sub(p.at) < progressEvery {
		return nil
	}
	var rows int64
	for _, r := range ranks {
		rows += r.takenRows
	}
	done := min(float64(rows)/float64(p.expect), 1)
	if done-p.last < progressStep && !(done == 1 && p.last < 1) {
		return nil
	}
	p.last, p.at = done, now
	ctx, cancel := context.WithTimeout(ctx, progressEvery)
	defer cancel()
	return p.to.ReportProgress(ctx, done)
}

// showLocalizing tells a cluster manager that shows them the ranks still
// fetching and unpacking their files.
func showLocalizing(cm ClusterManager, ranks []rankProgress) {
	s, ok := cm.(LocalizingShower)
	if !ok {
		return
	}
	var lines []string
	for _, r := range ranks {
		if r.localizing != nil && !r.exited {
			lines = append(lines, fmt.Sprintf("rank %d on %s: %s", r.rank, r.host, localizingMessage(r.localizing)))
		}
	}
	s.ShowLocalizing(lines)
}
