package driver

import (
	"fmt"
	"testing"

	"github.com/spindle-ml/spindle/feed"
)

// rowsOf lists the rows the stream segs make, each as rank:row.
func rowsOf(segs []feed.Segment) []string {
	var out []string
	for _, s := range segs {
		for r := s.RowStart; r < s.RowEnd; r++ {
			out = append(out, fmt.Sprintf("%d:%d", s.Rank, r))
		}
	}
	return out
}

// TestDealRestGivesEveryRowOnce deals rests that do and do not split into
// equal whole batches: the parts, in order, are the rest exactly, each
// part but the last ones holds whole batches, and pad is the batch count
// of the largest part (none when even batches are off).
func TestDealRestGivesEveryRowOnce(t *testing.T) {
	rest := []feed.Segment{{Rank: 0, RowStart: 5, RowEnd: 20}, {Rank: 2, RowStart: 0, RowEnd: 0}, {Rank: 3, RowStart: 40, RowEnd: 57}}
	tests := []struct {
		name    string
		n, b    int
		even    feed.EvenMode
		rows    []int64
		wantPad int64
	}{
		{"equal batches", 2, 4, feed.EvenPad, []int64{16, 16}, 4},
		{"odd rows to the first", 3, 4, feed.EvenPad, []int64{12, 12, 8}, 3},
		{"a short last batch", 3, 5, feed.EvenDrop, []int64{12, 10, 10}, 3},
		{"more ranks than batches", 4, 10, feed.EvenPad, []int64{10, 10, 10, 2}, 1},
		{"even batches off", 3, 4, feed.EvenOff, []int64{12, 12, 8}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts, pad := dealRest(rest, tt.n, tt.b, tt.even)
			if pad != tt.wantPad {
				t.Errorf("pad = %d, want %d", pad, tt.wantPad)
			}
			var got []string
			for j, p := range parts {
				var rows int64
				for _, s := range p {
					rows += s.Rows()
				}
				if rows != tt.rows[j] {
					t.Errorf("rank %d got %d rows, want %d", j, rows, tt.rows[j])
				}
				got = append(got, rowsOf(p)...)
			}
			if want := rowsOf(rest); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("dealt rows\n%v\nwant the rest in order\n%v", got, want)
			}
		})
	}
}

// TestLostRankRestStartsAtTheWorldsBatch reads a lost rank's rest from the
// batches the world completed, both from its own plan and from what an
// earlier deal gave it of an older world's epoch, and deals it among the
// survivors: every row after the world's batch K once, none before.
func TestLostRankRestStartsAtTheWorldsBatch(t *testing.T) {
	d := &Driver{cfg: Config{BatchRows: 4, EvenBatches: feed.EvenOff}}
	plan := &feed.JobPlan{RowsPerRank: []int64{20, 20, 20, 20}, Ranks: make([][]feed.Split, 4)}
	w := &world{n: 4, plan: plan}
	own := &dealt{w: w, restEpoch: -1}
	rest := d.rankRest(own, 1, 0, 3)
	if got, want := fmt.Sprint(rowsOf(rest)), fmt.Sprint(rowsOf([]feed.Segment{{Rank: 1, RowStart: 12, RowEnd: 20}})); got != want {
		t.Fatalf("rest of rank 1 after 3 batches of its own plan = %v, want %v", got, want)
	}
	earlier := []feed.Segment{{Rank: 0, RowStart: 10, RowEnd: 13}, {Rank: 4, RowStart: 2, RowEnd: 9}}
	dl := &dealt{w: w, restEpoch: 2, rest: [][]feed.Segment{nil, earlier, nil, nil}}
	rest = d.rankRest(dl, 1, 2, 1)
	if got, want := fmt.Sprint(rowsOf(rest)), fmt.Sprint(rowsOf([]feed.Segment{{Rank: 4, RowStart: 3, RowEnd: 9}})); got != want {
		t.Fatalf("rest of rank 1 after 1 batch of its dealt epoch = %v, want %v", got, want)
	}
	if rest := d.rankRest(dl, 1, 3, 1); rowsOf(rest)[0] != "1:4" {
		t.Fatalf("a later epoch reads rank 1's own plan, got %v", rowsOf(rest))
	}
	parts, _ := dealRest(rest, 3, 4, feed.EvenPad)
	if got := fmt.Sprint(rowsOf(parts[0]), rowsOf(parts[1]), rowsOf(parts[2])); got != "[4:3 4:4 4:5 4:6] [4:7 4:8] []" {
		t.Fatalf("survivors' continuations = %s", got)
	}
}
