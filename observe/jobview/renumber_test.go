package jobview

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRenumberMovesRowsToTheirProcesses: after an elastic job of 4 went on
// without rank 1, each row shows the process that now holds its rank
// (its executor, host, counters and log), noting the rank it had; the row
// that left is kept among the left ranks, and the timeline says who
// moved. The same holds for a snapshot read back from JSON, as the page
// and the event log read it.
func TestRenumberMovesRowsToTheirProcesses(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	events := []Event{{Time: t0, Kind: KindSubmitted, Info: &Info{ID: "j", WorldSize: 4}}}
	for r, id := range []string{"exec-0", "exec-1", "exec-2", "exec-3"} {
		events = append(events,
			Event{Time: t0, Kind: KindExecutor, Rank: r, Role: "worker", RoleRank: r, Host: "h" + id[5:], Executor: id, State: RankRunning},
			Event{Time: t0, Kind: KindProgress, Rank: r, Progress: &Progress{Rows: int64(100 * (r + 1))}},
			Event{Time: t0, Kind: KindLog, Rank: r, Stream: "stdout", Line: "from " + id})
	}
	moves := Renumbering(1, 4)
	if want := []RankMove{{0, 0}, {2, 1}, {3, 2}}; !slices.Equal(moves, want) {
		t.Fatalf("Renumbering(1, 4) = %v, want %v", moves, want)
	}
	events = append(events, Event{Time: t0.Add(5 * time.Second), Kind: KindRenumber, Rank: 1, Renumbered: moves,
		Message: RenumberMessage(1, moves)})
	// Round trip through JSON, as the event log stores events.
	var logged []Event
	for _, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		logged = append(logged, back)
	}
	j := Replay(logged)
	b, err := json.Marshal(j.Snapshot(t0.Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	type row struct {
		rank, roleRank int
		executor       string
		rows           int64
		former         string
	}
	var got []row
	for _, v := range s.Ranks {
		former, _ := json.Marshal(v.FormerRanks)
		got = append(got, row{v.Rank, v.RoleRank, v.Executor, v.Rows, string(former)})
	}
	want := []row{{0, 0, "exec-0", 100, "null"}, {1, 1, "exec-2", 300, "[2]"}, {2, 2, "exec-3", 400, "[3]"}}
	if !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if len(s.LeftRanks) != 1 || s.LeftRanks[0].Executor != "exec-1" || s.LeftRanks[0].State != RankLeft || s.LeftRanks[0].Rank != 1 {
		t.Errorf("left ranks %+v, want exec-1's row as rank 1, left", s.LeftRanks)
	}
	if s.Totals["rows"] != 1000 {
		t.Errorf("rows in all %v, want 1000 (the left rank's counted)", s.Totals["rows"])
	}
	if len(s.Changes) != 1 || s.Changes[0].Kind != KindRenumber || s.Changes[0].T != 5 ||
		s.Changes[0].Message != "rank 1 left; rank 2 is now rank 1, rank 3 is now rank 2" {
		t.Errorf("timeline %+v", s.Changes)
	}
	if c, _ := j.Log(1, "stdout", 0); !slices.Equal(c.Lines, []string{"from exec-2"}) {
		t.Errorf("rank 1's log %q, want exec-2's", c.Lines)
	}
	if ranks := j.Ranks(); !slices.Equal(ranks, []int{0, 1, 2}) {
		t.Errorf("ranks %v, want 0 to 2", ranks)
	}
	if !strings.Contains(string(b), `"former_ranks":[2]`) || !strings.Contains(string(b), `"left_ranks":[`) {
		t.Errorf("the page's JSON lacks former_ranks or left_ranks: %s", b)
	}
}

// TestRestartClearsFormerRanks: a gang restart starts new processes, which
// held no other rank.
func TestRestartClearsFormerRanks(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	j := NewJob()
	j.Apply(Event{Time: t0, Kind: KindSubmitted, Info: &Info{ID: "j", WorldSize: 3}})
	for r := 0; r < 3; r++ {
		j.Apply(Event{Time: t0, Kind: KindExecutor, Rank: r, State: RankRunning})
	}
	j.Apply(Event{Time: t0, Kind: KindRenumber, Rank: 0, Renumbered: Renumbering(0, 3)})
	j.Apply(Event{Time: t0.Add(time.Second), Kind: KindRestart, Generation: 1, Reason: "rank 0 failed"})
	s := j.Snapshot(t0.Add(time.Minute))
	for _, v := range s.Ranks {
		if len(v.FormerRanks) > 0 {
			t.Errorf("rank %d still notes former ranks %v after a restart", v.Rank, v.FormerRanks)
		}
	}
	if len(s.Changes) != 2 || s.Changes[0].Message != "rank 0 left; rank 1 is now rank 0, rank 2 is now rank 1" ||
		s.Changes[1].Message != "every rank restarted: rank 0 failed" {
		t.Errorf("timeline %+v", s.Changes)
	}
}
