package webui

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/observe/jobview"
)

// bigJob is a running job of n ranks, the last of which failed.
func bigJob(t0 time.Time, n int) *jobview.Job {
	j := jobview.NewJob()
	j.Apply(jobview.Event{Time: t0, Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "big", Name: "big", WorldSize: n}})
	j.Apply(jobview.Event{Time: t0, Kind: jobview.KindJobState, State: jobview.StateRunning})
	for r := 0; r < n; r++ {
		state := jobview.RankRunning
		if r == n-1 {
			state = jobview.RankFailed
		}
		j.Apply(jobview.Event{Time: t0, Kind: jobview.KindExecutor, Rank: r, Role: "worker", RoleRank: r, Host: "h", State: state})
	}
	return j
}

// A large job's data comes a page of ranks at a time, each page saying how
// many ranks there are and how many are in each state.
func TestJobDataPagesItsRanks(t *testing.T) {
	srv := httptest.NewServer(Handler(NewLive(bigJob(time.Now(), 250)), nil))
	defer srv.Close()
	for _, tc := range []struct {
		query       string
		first, rows int
	}{
		{"", 0, 250},
		{"?limit=100", 0, 100},
		{"?offset=200&limit=100", 200, 50},
		{"?offset=300&limit=100", 250, 0},
	} {
		code, body := get(t, srv, "/api/jobs/big"+tc.query)
		if code != 200 {
			t.Fatalf("%s: %d %s", tc.query, code, body)
		}
		var s jobview.Snapshot
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Ranks) != tc.rows || s.RankOffset != tc.first || (tc.rows > 0 && s.Ranks[0].Rank != tc.first) {
			t.Errorf("%s: %d ranks from %d, want %d from %d", tc.query, len(s.Ranks), s.RankOffset, tc.rows, tc.first)
		}
		if s.RankCount != 250 || s.RankStates[jobview.RankRunning] != 249 || s.RankStates[jobview.RankFailed] != 1 {
			t.Errorf("%s: %d ranks by state %v, want 250: 249 running, 1 failed", tc.query, s.RankCount, s.RankStates)
		}
	}
	for _, q := range []string{"?limit=x", "?offset=-1"} {
		if code, body := get(t, srv, "/api/jobs/big"+q); code != 400 || !strings.Contains(body, "want a count of ranks") {
			t.Errorf("%s: %d %q, want 400 naming the parameter", q, code, body)
		}
	}
}

// The page of a large job shows one page of its ranks, every rank counted
// by state above them.
func TestLargeJobPageShowsAPageOfRanks(t *testing.T) {
	srv := httptest.NewServer(Handler(NewLive(bigJob(time.Now(), 250)), nil))
	defer srv.Close()
	dom := render(t, srv.URL+"/jobs/big", 2*time.Second, "job-page-250-ranks.png")
	if rows := strings.Count(dom, `<tr class="rank`); rows != jobview.RanksPageSize {
		t.Errorf("the ranks table has %d rows, want a page of %d", rows, jobview.RanksPageSize)
	}
	for _, want := range []string{"250 ranks: 1 failed, 249 running", "showing 1–100"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page does not say %q:\n%.3000s", want, dom)
		}
	}
}
