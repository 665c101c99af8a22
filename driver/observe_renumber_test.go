package driver

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// TestRenumberedRanksKeepTheirRows: when a job of 4 goes on without rank 1
// in place, the observer records the renumbering, and from then on what
// the executors send under the ranks they started with (output lines,
// reported values) lands on the rows of the ranks their processes hold
// now; progress taken before the renumbering is not applied under the new
// numbers, and a late line of the process that left reaches no row.
func TestRenumberedRanksKeepTheirRows(t *testing.T) {
	var out, errOut syncbuf.Buffer
	var events []jobview.Event
	o := consoleObserver(&out, &errOut)
	o.onEvent = func(ev jobview.Event) { events = append(events, ev) }
	o.record(jobview.Event{Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-1", WorldSize: 4}})
	// Each process reads 10 rows more than the one started before it.
	world := func(hosts ...string) []rankProgress {
		var ps []rankProgress
		for r, h := range hosts {
			ps = append(ps, rankProgress{rank: r, role: RoleWorker, roleNum: r, host: h, takenRows: int64(10 * (h[1] - '0' + 1))})
		}
		return ps
	}
	before := time.Now()
	o.progress(before, world("h0", "h1", "h2", "h3"))
	say := func(started int, text string) {
		o.news(heartbeatNews(&driverpb.HeartbeatRequest{ExecutorId: fmt.Sprintf("exec-%d", started), Rank: int32(started),
			Output:  []*driverpb.OutputLine{{Text: fmt.Sprintf("[rank %d] %s", started, text)}},
			Reports: []*driverpb.Report{{Step: 7, Values: map[string]float64{"loss": float64(started)}, UnixMillis: time.Now().UnixMilli()}}}))
	}
	say(3, "before")

	o.renumber(1, 3)
	stale := world("h0", "h1", "h2", "h3")
	stale[1].takenRows = 25   // rank 1 read on before it was lost
	o.progress(before, stale) // taken before the renumbering
	if v := o.job.Snapshot(time.Now()).Ranks[1]; v.Host != "h2" || v.Rows != 30 {
		t.Errorf("rank 1 after progress taken before the renumbering: host %s, %d rows; want h2's row, 30 rows", v.Host, v.Rows)
	}
	o.progress(time.Now(), world("h0", "h2", "h3"))
	say(3, "after")
	say(1, "late")

	snap := o.job.Snapshot(time.Now())
	var got []string
	for _, v := range snap.Ranks {
		got = append(got, fmt.Sprintf("%d@%s%v", v.Rank, v.Host, v.FormerRanks))
	}
	if want := []string{"0@h0[]", "1@h2[2]", "2@h3[3]"}; !slices.Equal(got, want) {
		t.Errorf("ranks %v, want %v", got, want)
	}
	if len(snap.LeftRanks) != 1 || snap.LeftRanks[0].Host != "h1" {
		t.Errorf("left ranks %+v, want h1's", snap.LeftRanks)
	}
	if c, _ := o.job.Log(2, "stdout", 0); !slices.Equal(c.Lines, []string{"before", "after"}) {
		t.Errorf("rank 2's log %q, want the lines of the process that started as rank 3", c.Lines)
	}
	if c, _ := o.job.Log(1, "stdout", 0); len(c.Lines) != 0 {
		t.Errorf("rank 1's log %q, want none: the process that left said it", c.Lines)
	}
	var lossRanks []int
	for _, p := range snap.Scalars["loss"] {
		lossRanks = append(lossRanks, *p.Rank)
	}
	if !slices.Equal(lossRanks, []int{3, 2}) {
		t.Errorf("loss reported by ranks %v, want 3 then 2 (the same process, renumbered)", lossRanks)
	}
	var renumbered []jobview.Event
	for _, ev := range events {
		if ev.Kind == jobview.KindRenumber {
			renumbered = append(renumbered, ev)
		}
	}
	if len(renumbered) != 1 || renumbered[0].Rank != 1 ||
		!slices.Equal(renumbered[0].Renumbered, []jobview.RankMove{{From: 0, To: 0}, {From: 2, To: 1}, {From: 3, To: 2}}) ||
		renumbered[0].Message != "rank 1 left; rank 2 is now rank 1, rank 3 is now rank 2" {
		t.Errorf("renumber events %+v", renumbered)
	}
}
