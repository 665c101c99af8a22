package feed

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestHeldEpochServesTheDealtRest: rank 0's epoch runs out while rank 1,
// lost after 3 batches, has rows left; the held epoch does not end, asks
// for more, serves rank 1's rest (read by rank 1's epoch rules) and ends
// only when told. Rank 0's rows, rank 1's first batches and the rest fed
// to rank 0 are every row of the epoch once.
func TestHeldEpochServesTheDealtRest(t *testing.T) {
	const rows, batch, done = 400, 16, 3
	plan := planFiles(t, FormatParquet, rows, 2)
	shuffled := func(c *PipelineConfig) {
		c.Shuffle, c.Seed, c.ShuffleBufferRows, c.BatchRows = true, 5, 40, batch
	}
	lost, _ := epochIDs(t, newTestPipeline(t, plan, 1, shuffled), 0)
	own, _ := epochIDs(t, newTestPipeline(t, plan, 0, shuffled), 0)
	cfg := PipelineConfig{Schema: plan.Schema, LabelColumn: "label", EvenBatches: EvenOff}
	shuffled(&cfg)
	rest := Segment{Splits: plan.Ranks[1], Rank: 1, RowStart: done * batch, RowEnd: int64(len(lost))}

	base, err := newTestPipeline(t, plan, 0, shuffled).Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	base = &countingReader{Reader: base}
	var asked []int
	var readWhenAsked []int64
	more := func(ctx context.Context, epoch int) (Reader, error) {
		asked = append(asked, epoch)
		readWhenAsked = append(readWhenAsked, base.(*countingReader).rows)
		if len(asked) > 1 {
			return nil, nil
		}
		return SegmentEpoch(ctx, newResolver(), cfg, []Segment{rest}, epoch, 0)
	}
	h := HeldEpoch(base, 0, more)
	got := readAll(t, h, "id")
	if !slices.Equal(asked, []int{0, 0}) {
		t.Fatalf("asked for more of epochs %v, want epoch 0 twice (after its own rows, after the rest)", asked)
	}
	if readWhenAsked[0] != int64(len(own)) {
		t.Fatalf("asked for more after %d rows, want after all %d of the rank's own", readWhenAsked[0], len(own))
	}
	if want := slices.Concat(own, lost[done*batch:]); !slices.Equal(got, want) {
		t.Fatalf("held epoch gave %d rows, want the rank's %d and then the lost rank's %d left, in order",
			len(got), len(own), len(lost)-done*batch)
	}
	checkAllOnce(t, append(got, lost[:done*batch]...), rows)
	if rec, err := h.Next(context.Background()); err == nil {
		rec.Release()
		t.Fatal("an ended epoch gave another batch")
	}
	if len(asked) != 2 {
		t.Fatalf("an ended epoch asked for more again (%d asks)", len(asked))
	}
}

// countingReader counts the rows read through it.
type countingReader struct {
	Reader
	rows int64
}

func (c *countingReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	rec, err := c.Reader.Next(ctx)
	if err == nil {
		c.rows += rec.NumRows()
	}
	return rec, err
}
