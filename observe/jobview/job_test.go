package jobview

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestReplayBuildsRanksRatesAndState(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	events := []Event{
		{Time: t0, Kind: KindSubmitted, Info: &Info{ID: "j1", Name: "demo", User: "ann", Mode: "local[2]", WorldSize: 2}},
		{Time: t0, Kind: KindJobState, State: StateRunning},
		{Time: t0, Kind: KindExecutor, Rank: 0, Role: "worker", Host: "h0", State: RankRunning},
		{Time: t0, Kind: KindExecutor, Rank: 1, Role: "worker", RoleRank: 1, Host: "h1", State: RankRunning},
		{Time: t0, Kind: KindProgress, Rank: 0, Progress: &Progress{Rows: 0}},
		{Time: t0, Kind: KindProgress, Rank: 1, Progress: &Progress{Rows: 0}},
		{Time: t0.Add(2 * time.Second), Kind: KindProgress, Rank: 0, Progress: &Progress{Rows: 2000, Bytes: 8000, CPUSeconds: 1}},
		{Time: t0.Add(2 * time.Second), Kind: KindProgress, Rank: 1, Progress: &Progress{Rows: 400}},
		{Time: t0.Add(3 * time.Second), Kind: KindScalars, Rank: 0, Step: 10, Values: map[string]float64{"loss": 0.5}},
		{Time: t0.Add(4 * time.Second), Kind: KindJobState, State: StateFailed, Reason: "rank 1 on h1 exited 3"},
	}
	s := Replay(events).Snapshot(t0.Add(time.Hour))
	if s.State != StateFailed || s.Reason != "rank 1 on h1 exited 3" {
		t.Fatalf("state %q reason %q", s.State, s.Reason)
	}
	if s.Duration != 4 {
		t.Errorf("duration %v, want 4 s (ended jobs stop the clock)", s.Duration)
	}
	if len(s.Ranks) != 2 || s.Ranks[1].Host != "h1" || s.Ranks[1].RoleRank != 1 {
		t.Fatalf("ranks %+v", s.Ranks)
	}
	if r := s.Ranks[0]; r.RowsPerSec != 1000 || r.BytesPerSec != 4000 || r.CPUPercent != 50 {
		t.Errorf("rank 0 rates %+v", r)
	}
	if s.Slowest == nil || *s.Slowest != 1 {
		t.Errorf("slowest rank %v, want 1", s.Slowest)
	}
	if got := s.Scalars["loss"]; len(got) != 1 || got[0].V != 0.5 || got[0].T != 3 {
		t.Errorf("loss series %+v", got)
	}
	if len(s.Throughput) != 1 || s.Throughput[0].V != 1200 {
		t.Errorf("throughput %+v, want one point of 1200 rows/s", s.Throughput)
	}
}

func TestLogRingKeepsTheLastLinesNumbered(t *testing.T) {
	j := NewJob()
	total := LogLinesKept + 10
	for i := 0; i < total; i++ {
		j.Apply(Event{Kind: KindLog, Rank: 0, Stream: "stderr", Line: fmt.Sprint("line ", i)})
	}
	c, ok := j.Log(0, "stderr", 0)
	if !ok || !c.Truncated || c.First != 10 || c.Next != int64(total) || len(c.Lines) != LogLinesKept {
		t.Fatalf("chunk first=%d next=%d truncated=%v lines=%d", c.First, c.Next, c.Truncated, len(c.Lines))
	}
	if c.Lines[0] != "line 10" || c.Lines[len(c.Lines)-1] != fmt.Sprint("line ", total-1) {
		t.Errorf("lines run %q .. %q", c.Lines[0], c.Lines[len(c.Lines)-1])
	}
	// Following from Next returns nothing new until a line arrives.
	c2, _ := j.Log(0, "stderr", c.Next)
	if len(c2.Lines) != 0 || c2.Next != c.Next {
		t.Errorf("follow returned %+v", c2)
	}
	j.Apply(Event{Kind: KindLog, Rank: 0, Stream: "stderr", Line: "new"})
	c3, _ := j.Log(0, "stderr", c.Next)
	if len(c3.Lines) != 1 || c3.Lines[0] != "new" {
		t.Errorf("follow after a line: %+v", c3)
	}
	if _, ok := j.Log(7, "stderr", 0); ok {
		t.Error("an unknown rank has a log")
	}
}

func TestSeriesStayBounded(t *testing.T) {
	j := NewJob()
	t0 := time.Now()
	j.Apply(Event{Time: t0, Kind: KindSubmitted, Info: &Info{ID: "j"}})
	for i := 0; i < 10*SeriesPointsKept; i++ {
		j.Apply(Event{Time: t0.Add(time.Duration(i) * time.Second), Kind: KindScalars, Values: map[string]float64{"loss": float64(i)}})
	}
	pts := j.Snapshot(t0).Scalars["loss"]
	if len(pts) > SeriesPointsKept || len(pts) < SeriesPointsKept/2 {
		t.Fatalf("%d points kept", len(pts))
	}
	if pts[0].V != 0 || pts[len(pts)-1].V != float64(10*SeriesPointsKept-1) {
		t.Errorf("series lost its ends: %v .. %v", pts[0], pts[len(pts)-1])
	}
}

func TestRedactHidesSecretKeys(t *testing.T) {
	got := Redact(map[string]string{"spindle.authenticate.secret": "s3", "spindle.yarn.keytab": "/k", "spindle.feed.batchRows": "8"})
	if got["spindle.authenticate.secret"] != "*****" || got["spindle.yarn.keytab"] != "*****" || got["spindle.feed.batchRows"] != "8" {
		t.Fatalf("redacted %v", got)
	}
}

// TestLogBytesShared: a large job keeps fewer lines of each stream, within
// its share of LogBytesKept, and numbers lines as before.
func TestLogBytesShared(t *testing.T) {
	j := NewJob()
	j.Apply(Event{Kind: KindSubmitted, Info: &Info{ID: "big", WorldSize: 1000}})
	line := strings.Repeat("x", 100)
	for i := 0; i < LogLinesKept; i++ {
		j.Apply(Event{Kind: KindLog, Rank: 7, Stream: "stdout", Line: line})
	}
	c, ok := j.Log(7, "stdout", 0)
	if !ok || !c.Truncated || c.Next != LogLinesKept {
		t.Fatalf("chunk %+v", c)
	}
	if kept := len(c.Lines) * lineCost(line); kept > j.streamLogBytes() || len(c.Lines) < 10 {
		t.Fatalf("kept %d lines (%d bytes) of a %d-byte share", len(c.Lines), kept, j.streamLogBytes())
	}
	if c.First != c.Next-int64(len(c.Lines)) {
		t.Fatalf("first line %d, next %d, %d lines", c.First, c.Next, len(c.Lines))
	}
	small := NewJob()
	small.Apply(Event{Kind: KindSubmitted, Info: &Info{ID: "small", WorldSize: 4}})
	for i := 0; i < LogLinesKept+10; i++ {
		small.Apply(Event{Kind: KindLog, Rank: 0, Stream: "stdout", Line: line})
	}
	if c, _ := small.Log(0, "stdout", 0); len(c.Lines) != LogLinesKept {
		t.Fatalf("a small job keeps %d lines, want %d", len(c.Lines), LogLinesKept)
	}
}

// The models a job saved are listed in order, the newest ModelsKept of them.
func TestSavedModels(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	events := []Event{{Time: t0, Kind: KindSubmitted, Info: &Info{ID: "j1", WorldSize: 1}}}
	for v := 1; v <= ModelsKept+2; v++ {
		events = append(events, Event{Time: t0.Add(time.Duration(v) * time.Second), Kind: KindModelSaved, Rank: 0,
			Model: &ModelRef{Name: "ctr", Version: int64(v), URI: fmt.Sprintf("/models/ctr/%d", v)}})
	}
	s := Replay(events).Snapshot(t0.Add(time.Hour))
	if len(s.Models) != ModelsKept || s.Models[0].Version != 3 || s.Models[ModelsKept-1].URI != fmt.Sprintf("/models/ctr/%d", ModelsKept+2) {
		t.Fatalf("models: %d, first %+v", len(s.Models), s.Models[0])
	}
}
