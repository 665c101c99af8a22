package driver

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// The line reports what training processes took off their feed sockets,
// not what executors wrote into them: a rank whose executor filled the
// socket while the process read nothing shows no progress.
func TestProgressCountsWhatTrainingTook(t *testing.T) {
	var out, errb bytes.Buffer
	c := NewConsole(&out, &errb, false)
	p := newProgress(c, 2*time.Second, 3, 6000)
	t0 := p.start
	p.update(t0.Add(1*time.Second), []rankProgress{{rank: 0, rows: 500, takenRows: 100}, {rank: 1, rows: 400}})
	if errb.Len() != 0 {
		t.Fatalf("a plain line before the interval: %q", errb.String())
	}
	p.update(t0.Add(2*time.Second), []rankProgress{
		{rank: 0, rows: 1500, takenRows: 1020, epoch: 1},
		{rank: 1, rows: 1400, takenRows: 980, epoch: 1},
	})
	line := errb.String()
	// 2,000 rows taken (not the 2,900 sent), 1,900 rows/s since t0+1s,
	// 4,000 rows left: ETA 2s.
	for _, want := range []string{"epoch 2/3", "2000 rows", "1900 rows/s", "ETA 2s", "read ahead: 900 rows"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "slowest") {
		t.Errorf("ranks within 5%% of each other, yet a slowest one is named: %q", line)
	}
}

// When ranks diverge, the line names the slowest.
func TestProgressNamesTheSlowestRank(t *testing.T) {
	var out, errb bytes.Buffer
	c := NewConsole(&out, &errb, false)
	p := newProgress(c, time.Second, 2, 0)
	t0 := p.start
	p.update(t0.Add(1*time.Second), []rankProgress{{rank: 0}, {rank: 1}, {rank: 2}})
	mark := errb.Len()
	p.update(t0.Add(2*time.Second), []rankProgress{{rank: 0, takenRows: 1000, epoch: 1}, {rank: 1, takenRows: 100}, {rank: 2, takenRows: 990, epoch: 1}})
	line := errb.String()[mark:]
	if !strings.Contains(line, "slowest: rank 1 (epoch 1, 100 rows, 100 rows/s)") || strings.Contains(line, "ETA") {
		t.Errorf("progress line %q: want rank 1 named slowest and no ETA (total unknown)", line)
	}
	// A rank that is done drops out.
	mark = errb.Len()
	p.update(t0.Add(3*time.Second), []rankProgress{{rank: 0, takenRows: 2000, epoch: 1}, {rank: 1, takenRows: 100, exited: true}, {rank: 2, takenRows: 1990, epoch: 1}})
	if last := errb.String()[mark:]; last == "" || strings.Contains(last, "slowest") {
		t.Errorf("progress line %q names a slowest rank among ranks in step", last)
	}
}

func TestConsoleKeepsLiveLineBelowOutput(t *testing.T) {
	var out bytes.Buffer
	c := NewConsole(&out, &out, true)
	c.Live("progress: 1")
	c.Println("[rank 0] hello")
	c.EndLive()
	got := out.String()
	want := "\r\033[Kprogress: 1" + "\r\033[K" + "[rank 0] hello\n" + "progress: 1" + "\n"
	if got != want {
		t.Fatalf("console wrote %q, want %q", got, want)
	}
}

// Before any rank feeds, and in a job without input, the line names no
// epoch: not the last one ("epoch 12/12, 0 rows") before training began.
// A rank still localizing its files says how far it is.
func TestProgressBeforeTraining(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expect int64
		ranks  []rankProgress
		want   string
	}{
		{"no rank yet", 6000, nil, "progress: no rows yet"},
		{"localizing", 6000, []rankProgress{{rank: 0, localizing: &driverpb.Localizing{DoneBytes: 10, TotalBytes: 40}}},
			"progress: no rows yet, 0s elapsed | rank 0: localizing: 10 of 40 bytes"},
		{"no input", 0, []rankProgress{{rank: 0}}, "progress: no rows yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProgress(NewConsole(&bytes.Buffer{}, &bytes.Buffer{}, false), time.Second, 12, tc.expect)
			line := p.render(p.start, tc.ranks)
			if !strings.HasPrefix(line, tc.want) || strings.Contains(line, "epoch") {
				t.Fatalf("progress line %q, want it to start %q and name no epoch", line, tc.want)
			}
		})
	}
}
