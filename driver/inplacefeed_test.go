package driver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// inPlaceGang is a registered elastic gang of 4 workers with input that
// goes on in place: 20 rows a rank in batches of 4 (even batches off),
// 2 epochs, and a plan of 27, 27 and 26 rows for 3. It returns the
// control server its feeds and heartbeats reach, and what the driver
// said.
func inPlaceGang(t *testing.T) (*controlServer, *roster, *syncbuf.Buffer) {
	t.Helper()
	said := &syncbuf.Buffer{} // the deal says it on its own goroutine
	d := &Driver{cfg: Config{BatchRows: 4, EvenBatches: feed.EvenOff, Epochs: 2, Inputs: []string{"ids/*.csv"}},
		logger: slog.New(slog.DiscardHandler)}
	w4 := &world{n: 4, target: 5, plan: &feed.JobPlan{RowsPerRank: []int64{20, 20, 20, 20}, Ranks: make([][]feed.Split, 4)}}
	smaller := func(_ context.Context, n int) (*world, error) {
		if n != 3 {
			return nil, fmt.Errorf("planned for %d ranks, want 3", n)
		}
		return &world{n: 3, target: 7, plan: &feed.JobPlan{RowsPerRank: []int64{27, 27, 26},
			Ranks: [][]feed.Split{{{URI: "file:///a"}}, {{URI: "file:///b"}}, {{URI: "file:///c"}}}}}, nil
	}
	d.elasticFeed = &elasticFeed{dl: &dealt{w: w4, restEpoch: -1}, build: smaller}
	var shrinks []string
	g := shrinkingRoster(t, 4, 2, 3, &shrinks)
	stop := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	f := d.inPlaceFeedFor(ctx, g, stop)
	f.say = func(msg string) { _, _ = said.Write([]byte(msg)) }
	t.Cleanup(func() {
		close(stop)
		cancel()
		f.wait()
	})
	return &controlServer{roster: g, gate: f.gate, inPlace: f, stop: stop, logger: d.logger}, g, said
}

// holdEnd asks, in the background, whether id's epoch ends.
func holdEnd(s *controlServer, id string, epoch int) <-chan held {
	ch := make(chan held, 1)
	go func() {
		resp, err := s.HoldEpoch(context.Background(), &driverpb.HoldEpochRequest{ExecutorId: id, Epoch: int32(epoch)})
		ch <- held{segs: driverpb.FeedSegments(resp.GetRest()), next: resp.GetNext(), err: err}
	}()
	return ch
}

// reportBatches sends id's heartbeat carrying its trainer's report that
// the world of membership version completed batches of epoch.
func reportBatches(t *testing.T, s *controlServer, id string, version int64, epoch int, batches int64) {
	t.Helper()
	_, err := s.Heartbeat(context.Background(), &driverpb.HeartbeatRequest{ExecutorId: id, MembershipVersion: version,
		WorldBatches: &driverpb.WorldBatches{MembershipVersion: version, Epoch: int32(epoch), Batches: batches}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLostRanksRestGoesToTheSurvivorsFeeds: rank 1 of 4 is killed in
// epoch 0; the survivors' feeds wait at the epoch's end until one
// survivor's heartbeat reports that the world completed 3 batches, then
// get rank 1's rows from batch 3 on (12 to 20), dealt in whole batches in
// their new rank order, each with its share of the plan for 3; after
// those rows the epoch ends for all.
func TestLostRanksRestGoesToTheSurvivorsFeeds(t *testing.T) {
	s, g, said := inPlaceGang(t)
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	if closed(g.failed) {
		t.Fatalf("the generation failed: %v", g.err())
	}
	survivors := []string{"exec-0", "exec-2", "exec-3"}
	var ends []<-chan held
	for _, id := range survivors {
		ends = append(ends, holdEnd(s, id, 0))
	}
	waitWaiting(t, s.gate, 3)
	notYet(t, "before the report", ends...)
	reportBatches(t, s, "exec-2", 0, 0, 3) // the old membership's: not the one awaited
	reportBatches(t, s, "exec-3", 1, 0, 3)
	wantRows := [][]feed.Segment{{{Rank: 1, RowStart: 12, RowEnd: 16}}, {{Rank: 1, RowStart: 16, RowEnd: 20}}, nil}
	for j, ch := range ends {
		h := answer(t, ch)
		if h.err != nil {
			t.Fatalf("%s: %v", survivors[j], h.err)
		}
		if got, want := fmt.Sprint(rowsOf(h.segs)), fmt.Sprint(rowsOf(wantRows[j])); got != want {
			t.Errorf("%s was dealt rows %v, want %v", survivors[j], got, want)
		}
		if p := h.next; p.GetRank() != int32(j) || p.GetTargetBatches() != 7 || len(p.GetSplits()) != 1 || p.GetEpochRows() == 0 {
			t.Errorf("%s got the plan %v, want rank %d's of the world of 3", survivors[j], p, j)
		}
	}
	// The deal says so once the feeds have their answers: wait for it.
	const dealt = "the 8 rows rank 1 had left of epoch 0 (from batch 3) are dealt among the 3 ranks that went on"
	testutil.WaitFor(t, 10*time.Second, func() error {
		if !strings.Contains(said.String(), dealt) {
			return fmt.Errorf("the driver said %q", said.String())
		}
		return nil
	})
	// exec-3's answer had no rows: its epoch ended. The others', after
	// their rows.
	again := []<-chan held{holdEnd(s, "exec-0", 0), holdEnd(s, "exec-2", 0)}
	for i, ch := range again {
		if h := answer(t, ch); h.err != nil || len(h.segs) > 0 {
			t.Errorf("survivor %d asked again: %+v, want the epoch's end", i, h)
		}
	}
}

// TestRestTheFeedsCannotServeRestartsTheGang: when the survivors' feeds
// had ended the epoch the lost rank died in, with rows of it left, no
// feed can serve them in that epoch's order: the generation fails, so
// that the gang restarts smaller at its checkpoint. A rank that died
// after its epoch's last batch has its next epoch dealt whole instead.
func TestRestTheFeedsCannotServeRestartsTheGang(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches int64
		fails   bool
	}{
		{"rows of the ended epoch left", 4, true},
		{"the ended epoch done", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, g, _ := inPlaceGang(t)
			var ends []<-chan held
			for _, id := range []string{"exec-0", "exec-1", "exec-2", "exec-3"} {
				ends = append(ends, holdEnd(s, id, 0))
			}
			for _, ch := range ends {
				if h := answer(t, ch); h.err != nil || len(h.segs) > 0 {
					t.Fatalf("epoch 0's end answered %+v", h)
				}
			}
			if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"}); err != nil {
				t.Fatal(err)
			}
			end := holdEnd(s, "exec-0", 1)
			reportBatches(t, s, "exec-0", 1, 0, tc.batches)
			if tc.fails {
				within(t, g.failed, "the generation did not fail")
				if err := g.err(); !strings.Contains(err.Error(), "rank 1") || !strings.Contains(err.Error(), "already ended the epoch") || !strings.Contains(err.Error(), "so the gang restarts smaller") {
					t.Fatalf("the generation failed with %v", err)
				}
				return
			}
			h := answer(t, end)
			if got, want := fmt.Sprint(rowsOf(h.segs)), fmt.Sprint(rowsOf([]feed.Segment{{Rank: 1, RowStart: 0, RowEnd: 8}})); h.err != nil || got != want {
				t.Fatalf("exec-0 was dealt %v (%v), want rank 1's epoch 1 from its start: %v", got, h.err, want)
			}
			if h.next != nil {
				t.Errorf("a plan after the last epoch: %v", h.next)
			}
			if closed(g.failed) {
				t.Fatalf("the generation failed: %v", g.err())
			}
		})
	}
}

// TestWorkerThatEndedWellLeavesTheGate: a worker whose process exited 0
// reads no more of the feed, so the others' epochs end without it.
func TestWorkerThatEndedWellLeavesTheGate(t *testing.T) {
	s, g, _ := inPlaceGang(t)
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-3"}); err != nil {
		t.Fatal(err)
	}
	var ends []<-chan held
	for _, id := range []string{"exec-0", "exec-1", "exec-2"} {
		ends = append(ends, holdEnd(s, id, 0))
	}
	for _, ch := range ends {
		if h := answer(t, ch); h.err != nil || len(h.segs) > 0 {
			t.Fatalf("epoch 0's end answered %+v, want its end", h)
		}
	}
}

// TestLossNotedBeforeItsStderr: why a rest could not be dealt goes on the
// loss's first line, before the lost process's stderr, so that the
// console's one-line reason says it.
func TestLossNotedBeforeItsStderr(t *testing.T) {
	loss := &lossError{msg: "rank 1 (host h1, executor exec-1): training process was killed by signal SIGKILL; last lines of its stderr:\n    boom",
		rank: 1, stderrTail: "boom"}
	err := lossNoted(loss, "; its rest could not be dealt")
	reason, detail := splitReason(err.Error())
	if !strings.HasSuffix(reason, "SIGKILL; its rest could not be dealt") || !strings.Contains(detail, "boom") {
		t.Fatalf("reason %q, detail %q", reason, detail)
	}
	if f, ok := FailedRank(err); !ok || f.Rank != 1 || f.StderrTail != "boom" {
		t.Fatalf("FailedRank = %+v, %v; want rank 1 with its stderr", f, ok)
	}
}

// TestSecondLossRestartsTheGang: a generation with input deals one lost
// rank's rest; a second worker lost once the first shrink settled fails
// the generation (the gang restarts smaller at its checkpoint) although
// restarts are left.
func TestSecondLossRestartsTheGang(t *testing.T) {
	_, g, _ := inPlaceGang(t)
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	settleShrink(g)
	if closed(g.failed) {
		t.Fatalf("the first loss failed the generation: %v", g.err())
	}
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-2", Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	if !closed(g.failed) {
		t.Fatal("the second loss did not fail the generation")
	}
}

// TestSameBatchesDecidesWhoWaitsForTheProcess: a feed may hold its
// epoch's end for its process only where every rank reads as many
// batches (FeedTask.hold_for_process); with even batches off and a rank
// one batch short, that rank's process would wait there while the others
// need it in their last step.
func TestSameBatchesDecidesWhoWaitsForTheProcess(t *testing.T) {
	for _, c := range []struct {
		name string
		rows []int64
		even feed.EvenMode
		want bool
	}{
		{"padded", []int64{1000, 900}, feed.EvenPad, true},
		{"dropped", []int64{1000, 900}, feed.EvenDrop, true},
		{"off, rows that split evenly", []int64{1000, 1000, 901}, feed.EvenOff, true},
		{"off, a rank a batch short", []int64{1000, 1000, 899}, feed.EvenOff, false},
		{"off, rows not known yet", []int64{0, 0}, feed.EvenOff, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := sameBatches(&feed.JobPlan{RowsPerRank: c.rows}, 100, c.even); got != c.want {
				t.Fatalf("sameBatches(%v, 100, %s) = %t, want %t", c.rows, c.even, got, c.want)
			}
		})
	}
	if sameBatches(nil, 100, feed.EvenPad) {
		t.Fatal("a job without a plan holds for the process")
	}
}
