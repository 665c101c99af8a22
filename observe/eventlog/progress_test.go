package eventlog

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// A segment keeps each rank's latest progress, not every tick's, and a
// replay of the log ends with every rank's last counters.
func TestLogKeepsEachRanksLatestProgressPerSegment(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	dir := filepath.Join(t.TempDir(), "events")
	w, err := NewWriter(ctx, res, dir, "job-p", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	w.Record(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-p", WorldSize: 3}})
	for tick := 1; tick <= 100; tick++ {
		for r := 0; r < 3; r++ {
			w.Record(jobview.Event{Time: t0.Add(time.Duration(tick) * 500 * time.Millisecond), Kind: jobview.KindProgress, Rank: r,
				Progress: &jobview.Progress{Rows: int64(tick * (r + 1))}})
		}
	}
	w.Record(jobview.Event{Time: t0.Add(time.Minute), Kind: jobview.KindJobState, State: jobview.StateSucceeded})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	events, err := Read(ctx, res, dir, "job-p")
	if err != nil {
		t.Fatal(err)
	}
	progress := 0
	for _, ev := range events {
		if ev.Kind == jobview.KindProgress {
			progress++
		}
	}
	if progress != 3 {
		t.Errorf("the log holds %d progress events for 3 ranks in one segment, want 3", progress)
	}
	if last := events[len(events)-1]; last.Kind != jobview.KindJobState {
		t.Errorf("the log ends with a %s event, want the job's end after the ranks' counters", last.Kind)
	}
	snap := jobview.Replay(events).Snapshot(t0.Add(time.Minute))
	for r, v := range snap.Ranks {
		if want := int64(100 * (r + 1)); v.Rows != want {
			t.Errorf("rank %d replays with %d rows, want its last %d", r, v.Rows, want)
		}
	}
}

// A rank's latest GPU sample stays in the log when later progress has
// none (the executor samples GPUs now and then; its last report, at exit,
// has no sample).
func TestLogKeepsTheLatestGPUSample(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	dir := filepath.Join(t.TempDir(), "events")
	w, err := NewWriter(ctx, res, dir, "job-g", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	w.Record(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-g", WorldSize: 1}})
	w.Record(jobview.Event{Time: t0.Add(time.Second), Kind: jobview.KindProgress,
		Progress: &jobview.Progress{Rows: 10, GPUs: 1, GPUUtilRatio: 0.81}})
	w.Record(jobview.Event{Time: t0.Add(2 * time.Second), Kind: jobview.KindProgress, Progress: &jobview.Progress{Rows: 20}})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	events, err := Read(ctx, res, dir, "job-g")
	if err != nil {
		t.Fatal(err)
	}
	var sampled, rows int64
	for _, ev := range events {
		if ev.Kind == jobview.KindProgress {
			if ev.Progress.GPUs > 0 {
				sampled++
			}
			rows = ev.Progress.Rows
		}
	}
	if sampled != 1 || rows != 20 {
		t.Errorf("the log holds %d GPU samples and ends at %d rows, want 1 and the last 20", sampled, rows)
	}
}

// A large job's segment keeps each rank's latest values of each set of
// names; a small job's log keeps every value reported.
func TestLogThinsTheValuesOfLargeJobsOnly(t *testing.T) {
	for _, tc := range []struct {
		ranks, want int
	}{{2, 2 * 11}, {ThinValuesRanks + 1, 2 * (ThinValuesRanks + 1)}} {
		ctx := context.Background()
		res := fsys.NewResolver(fsys.Options{})
		dir := filepath.Join(t.TempDir(), "events")
		w, err := NewWriter(ctx, res, dir, "job-v", time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
		w.Record(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-v", WorldSize: tc.ranks}})
		for r := 0; r < tc.ranks; r++ {
			w.Record(jobview.Event{Time: t0, Kind: jobview.KindScalars, Rank: r, Values: map[string]float64{"accuracy": 0.5}})
			for step := 1; step <= 10; step++ {
				w.Record(jobview.Event{Time: t0.Add(time.Duration(step) * time.Second), Kind: jobview.KindScalars, Rank: r, Step: int64(step),
					Values: map[string]float64{"loss": 1 / float64(step)}})
			}
		}
		w.Record(jobview.Event{Time: t0.Add(time.Minute), Kind: jobview.KindJobState, State: jobview.StateSucceeded})
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		events, err := Read(ctx, res, dir, "job-v")
		res.Close()
		if err != nil {
			t.Fatal(err)
		}
		values, lastLoss := 0, map[int]float64{}
		for _, ev := range events {
			if ev.Kind == jobview.KindScalars {
				values++
				if v, ok := ev.Values["loss"]; ok {
					lastLoss[ev.Rank] = v
				}
			}
		}
		if values != tc.want {
			t.Errorf("%d ranks: the log holds %d values events, want %d", tc.ranks, values, tc.want)
		}
		for r := 0; r < tc.ranks; r++ {
			if lastLoss[r] != 0.1 {
				t.Errorf("%d ranks: rank %d's last loss is %v, want its last report, 0.1", tc.ranks, r, lastLoss[r])
			}
		}
	}
}

// The ranks' held progress is written before a renumbering, under the
// numbers it was reported by: replayed after it, old rank 1's counters
// would land on the row of the process that became rank 1.
func TestLogWritesProgressBeforeARenumbering(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	dir := filepath.Join(t.TempDir(), "events")
	w, err := NewWriter(ctx, res, dir, "job-r", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	w.Record(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-r", WorldSize: 3}})
	for r := 0; r < 3; r++ {
		w.Record(jobview.Event{Time: t0, Kind: jobview.KindExecutor, Rank: r, Executor: fmt.Sprintf("exec-%d", r), State: jobview.RankRunning})
		w.Record(jobview.Event{Time: t0.Add(time.Second), Kind: jobview.KindProgress, Rank: r, Progress: &jobview.Progress{Rows: int64(10 * (r + 1))}})
	}
	moves := jobview.Renumbering(1, 3)
	w.Record(jobview.Event{Time: t0.Add(2 * time.Second), Kind: jobview.KindRenumber, Rank: 1, Renumbered: moves})
	w.Record(jobview.Event{Time: t0.Add(3 * time.Second), Kind: jobview.KindProgress, Rank: 1, Progress: &jobview.Progress{Rows: 35}})
	w.Record(jobview.Event{Time: t0.Add(4 * time.Second), Kind: jobview.KindJobState, State: jobview.StateSucceeded})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	events, err := Read(ctx, res, dir, "job-r")
	if err != nil {
		t.Fatal(err)
	}
	snap := jobview.Replay(events).Snapshot(t0.Add(time.Minute))
	var got []string
	for _, v := range snap.Ranks {
		got = append(got, fmt.Sprintf("%d:%s:%d", v.Rank, v.Executor, v.Rows))
	}
	if want := []string{"0:exec-0:10", "1:exec-2:35"}; !slices.Equal(got, want) {
		t.Errorf("replayed rows %v, want %v", got, want)
	}
	if len(snap.LeftRanks) != 1 || snap.LeftRanks[0].Rows != 20 {
		t.Errorf("left ranks %+v, want exec-1's with its 20 rows", snap.LeftRanks)
	}
}
