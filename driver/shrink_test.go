package driver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// shrinkingRoster is a registered gang of n workers that goes on without
// a lost one in place, down to min, with budget restarts; shrinks
// collects what onShrink heard.
func shrinkingRoster(t *testing.T, n, min, budget int, shrinks *[]string) *roster {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("exec-%d", i)
	}
	g := newRoster(ids)
	g.shrinkWorkers, g.minWorkers = true, min
	g.budget = func(*lossError) (string, []string, bool) {
		if budget == 0 {
			return "", nil, false
		}
		budget--
		return "restart 1 of 3", nil, true
	}
	g.onShrink = func(rank, world int, msg string) {
		*shrinks = append(*shrinks, fmt.Sprintf("%d/%d: %s", rank, world, msg))
	}
	for i, id := range ids {
		register(t, g, id, fmt.Sprintf("h%d", i))
	}
	return g
}

// settleShrink ends the window in which a survivor's failure is taken for
// an unhealthy gang.
func settleShrink(g *roster) {
	g.mu.Lock()
	g.shrinking = nil
	g.mu.Unlock()
}

// TestLostWorkerLeavesTheOthersRunning: rank 1 of 4 killed under an
// elastic gang that shrinks in place does not fail the generation; the
// survivors' heartbeats carry a membership of the three of them in their
// old order (renumbered 0 to 2, the lost rank's next incarnation on rank
// 0, rank 1 named as left), the roster names them by their new ranks, and
// the job succeeds when the three exit 0.
func TestLostWorkerLeavesTheOthersRunning(t *testing.T) {
	var shrinks []string
	g := shrinkingRoster(t, 4, 2, 1, &shrinks)
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	if closed(g.failed) {
		t.Fatalf("the generation failed: %v", g.err())
	}
	if len(shrinks) != 1 || !strings.HasPrefix(shrinks[0], "1/3: rank 1 (host h1, executor exec-1): training process was killed by signal SIGKILL; the other 3 ranks go on without it in place (restart 1 of 3)") {
		t.Fatalf("onShrink heard %q", shrinks)
	}
	m, hosts := heartbeatMembership(t, g, "exec-3", 0)
	if m.GetVersion() != 1 || !slices.Equal(hosts, []string{"h0", "h2", "h3"}) || !slices.Equal(m.GetIncarnations(), []uint32{1, 0, 0}) ||
		!slices.Equal(m.GetLeft(), []int32{1}) || m.GetJoined() != -1 {
		t.Fatalf("membership %v, want version 1 of h0, h2, h3, incarnations [1 0 0], rank 1 left", m)
	}
	if hb, _ := g.heartbeat("exec-0", nil, 1); hb.GetMembership() != nil {
		t.Errorf("an executor that has version 1 got it again")
	}
	var ranks []string
	for _, p := range g.snapshot() {
		ranks = append(ranks, fmt.Sprintf("%d@%s", p.rank, p.host))
	}
	if want := []string{"0@h0", "1@h2", "2@h3"}; !slices.Equal(ranks, want) {
		t.Errorf("ranks %v, want %v", ranks, want)
	}
	// The lost executor's own end is no failure.
	g.executorGone(Event{Kind: ExecutorLost, ExecutorID: "exec-1"})
	settleShrink(g)
	for _, id := range []string{"exec-0", "exec-2", "exec-3"} {
		if err := g.exit(&driverpb.ExitReport{ExecutorId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if !closed(g.succeeded) || closed(g.failed) {
		t.Fatalf("the job did not succeed: %v", g.err())
	}
}

// TestShrinkingTwiceKeepsTheEpochGrowing: a second loss, once the first
// settled, shrinks again from the renumbered world: the membership drops
// the new rank that was lost and its epoch (the incarnations' sum) grows
// by one more; at MIN the next loss fails the generation.
func TestShrinkingTwiceKeepsTheEpochGrowing(t *testing.T) {
	var shrinks []string
	g := shrinkingRoster(t, 4, 2, 3, &shrinks)
	_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-0", Signal: "SIGKILL"})
	settleShrink(g)
	// exec-3 is rank 2 of 3 now.
	_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-3", ExitCode: 1})
	m := g.currentMembership()
	if m.GetVersion() != 2 || len(m.GetPeers()) != 2 || m.GetPeers()[1].GetHost() != "h2" || !slices.Equal(m.GetIncarnations(), []uint32{2, 0}) ||
		!slices.Equal(m.GetLeft(), []int32{2}) {
		t.Fatalf("membership %v, want version 2 of h1, h2 with incarnations [2 0], rank 2 left", m)
	}
	settleShrink(g)
	_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"})
	if !closed(g.failed) || failedRankOf(t, g.err()) != 0 {
		t.Fatalf("a loss at MIN did not fail the generation on rank 0: %v", g.err())
	}
}

// TestShrinkFallsBackToARestart: a survivor failing before the shrink
// settled (its training process did not go on in the smaller world) and
// no restarts left each fail the generation, which the elastic policy
// restarts smaller, and the error says why.
func TestShrinkFallsBackToARestart(t *testing.T) {
	t.Run("a survivor fails", func(t *testing.T) {
		var shrinks []string
		g := shrinkingRoster(t, 4, 2, 3, &shrinks)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"})
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-2", ExitCode: 1})
		if !closed(g.failed) || !strings.Contains(g.err().Error(), "soon after rank 1 (host h1, executor exec-1) was left behind") {
			t.Fatalf("failure %v, want one naming the shrink under way", g.err())
		}
	})
	t.Run("no restarts left", func(t *testing.T) {
		var shrinks []string
		g := shrinkingRoster(t, 4, 2, 0, &shrinks)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"})
		if !closed(g.failed) || len(shrinks) != 0 {
			t.Fatal("a loss with no restarts left did not fail the generation")
		}
	})
}

// TestShrinksInPlaceOnlyWhereItCan: the elastic policy with
// spindle.failure.shrinkInPlace shrinks a workers-only generation above
// MIN in place, with input unless the process reads it itself, and says
// why not otherwise.
func TestShrinksInPlaceOnlyWhereItCan(t *testing.T) {
	workers := workerSlots([]string{"a", "b", "c"})
	base := Config{FailurePolicy: PolicyElastic, ShrinkInPlace: true, MinExecutors: 2, NumExecutors: 3}
	withInput := base
	withInput.Inputs = []string{"data/*.parquet"}
	direct := withInput
	direct.FeedMode = "direct"
	atMin := base
	atMin.MinExecutors = 3
	off := base
	off.ShrinkInPlace = false
	for _, tc := range []struct {
		name string
		c    Config
		ok   bool
		why  string
	}{
		{"eligible", base, true, ""},
		{"with input", withInput, true, ""},
		{"reading its input itself", direct, false, "--feed direct"},
		{"at MIN", atMin, false, "spindle.failure.minExecutors"},
		{"not asked for", off, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := tc.c.shrinksInPlace(workers)
			if ok != tc.ok || !strings.Contains(why, tc.why) || (tc.why == "" && why != "") {
				t.Fatalf("shrinksInPlace = %v, %q; want %v, %q", ok, why, tc.ok, tc.why)
			}
		})
	}
}

// TestShrinkInPlaceNeedsElastic: the key under another policy is bad
// input, named.
func TestShrinkInPlaceNeedsElastic(t *testing.T) {
	c := Config{FailurePolicy: PolicyRestart, ShrinkInPlace: true, NumExecutors: 2}
	err := c.checkElastic()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "spindle.failure.shrinkInPlace needs spindle.failure.policy elastic") {
		t.Fatalf("checkElastic = %v, want a config error naming spindle.failure.shrinkInPlace", err)
	}
}
