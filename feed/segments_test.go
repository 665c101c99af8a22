package feed

import (
	"context"
	"slices"
	"testing"
)

// TestSegmentEpochDealsTheRest: three ranks take part of a shuffled epoch;
// the rest of each rank's epoch, dealt as segments to two new ranks, gives
// them exactly the rows the old ranks had left, in the old ranks' order.
func TestSegmentEpochDealsTheRest(t *testing.T) {
	const rows, batch = 600, 16
	plan := planFiles(t, FormatParquet, rows, 3)
	shuffled := func(c *PipelineConfig) {
		c.Shuffle, c.Seed, c.ShuffleBufferRows, c.BatchRows = true, 9, 50, batch
	}
	var taken []int64
	var rest [][]int64
	var segs []Segment
	for r := range 3 {
		ids, _ := epochIDs(t, newTestPipeline(t, plan, r, shuffled), 1)
		k := int64(r+1) * 2 * batch // rows each old rank consumed
		taken = append(taken, ids[:k]...)
		rest = append(rest, ids[k:])
		segs = append(segs, Segment{Splits: plan.Ranks[r], Rank: r, RowStart: k, RowEnd: int64(len(ids))})
	}
	cfg := PipelineConfig{Schema: plan.Schema, LabelColumn: "label", EvenBatches: EvenOff}
	shuffled(&cfg)
	tests := []struct {
		name string
		segs [][]Segment
		pad  int64
	}{
		{"one new rank", [][]Segment{segs}, 0},
		{"two new ranks, a segment split between them", [][]Segment{
			{segs[0], {Splits: segs[1].Splits, Rank: 1, RowStart: segs[1].RowStart, RowEnd: segs[1].RowStart + 40}},
			{{Splits: segs[1].Splits, Rank: 1, RowStart: segs[1].RowStart + 40, RowEnd: segs[1].RowEnd}, segs[2]},
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int64
			for _, ss := range tt.segs {
				r, err := SegmentEpoch(context.Background(), newResolver(), cfg, ss, 1, tt.pad)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, readAll(t, r, "id")...)
			}
			if want := slices.Concat(rest...); !slices.Equal(got, want) {
				t.Fatalf("the segments gave %d rows, not the %d the old ranks had left in their order", len(got), len(want))
			}
			checkAllOnce(t, append(slices.Clone(taken), got...), rows)
		})
	}
	// Padding repeats the first batch up to the count asked for.
	r, err := SegmentEpoch(context.Background(), newResolver(), cfg, []Segment{{Splits: segs[0].Splits, Rank: 0, RowStart: 0, RowEnd: 20}}, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r, "id"); len(got) != 20+16+16 {
		t.Fatalf("padded epoch has %d rows, want 2 batches of its own and 2 repeated (52)", len(got))
	}
}
