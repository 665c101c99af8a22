package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// aheadFiles writes n Parquet files of rows rows each (ids counting up
// across them) into a new directory and returns it.
func aheadFiles(t *testing.T, n int, rows int64) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		writeParquet(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", i)), testSchema, int64(i)*rows, rows, rows/2)
	}
	return dir
}

// splitStreamOf returns the split stream at the start of an unshuffled
// epoch's chain.
func splitStreamOf(t *testing.T, r Reader) *splitStream {
	t.Helper()
	s, ok := r.(*epochReader).chain.(*rebatcher).in.(*splitStream)
	if !ok {
		t.Fatal("the epoch's chain does not start with a split stream")
	}
	return s
}

// TestPipelineOpensNextSplitAhead: while a split is read, the next one
// in the epoch's order is opened on a goroutine, and the epoch's rows
// are the same, in the same order, as without.
func TestPipelineOpensNextSplitAhead(t *testing.T) {
	dir := aheadFiles(t, 3, 1000)
	ctx := context.Background()
	var ids [2][]int64
	for k, ahead := range []bool{true, false} {
		func() {
			defer func(was bool) { openAhead = was }(openAhead)
			openAhead = ahead
			p := plannedPipeline(t, newResolver(), dir, PipelineConfig{BatchRows: 300, EvenBatches: EvenOff, DecodeWorkers: 2})
			defer p.Close()
			r, err := p.Epoch(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for n := 0; ; n++ {
				rec, err := r.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					s := splitStreamOf(t, r)
					switch {
					case ahead && (s.ahead == nil || s.ahead.split != s.order[1]):
						t.Fatalf("reading split %d, split %d is not being opened", s.order[0], s.order[1])
					case ahead:
						<-s.ahead.done
						if s.ahead.err != nil || s.ahead.r == nil {
							t.Fatalf("opening split %d ahead: %v", s.order[1], s.ahead.err)
						}
					case s.ahead != nil:
						t.Fatal("a split opened ahead with openAhead off")
					}
				}
				col := rec.Column(0).(*array.Int64)
				ids[k] = append(ids[k], col.Int64Values()...)
				rec.Release()
			}
		}()
	}
	if len(ids[0]) != 3000 || fmt.Sprint(ids[0]) != fmt.Sprint(ids[1]) {
		t.Fatalf("%d rows opened ahead, %d not; or in another order", len(ids[0]), len(ids[1]))
	}
}

// TestSplitAheadErrorWaitsItsTurn: a split that fails to open ahead fails
// the epoch where it comes, naming its file, after every row of the
// splits before it.
func TestSplitAheadErrorWaitsItsTurn(t *testing.T) {
	dir := aheadFiles(t, 1, 1000)
	ctx := context.Background()
	plan, err := Plan(ctx, newResolver(), PlanRequest{Inputs: []string{dir}, Ranks: 1, LabelColumn: "label"})
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.parquet")
	if err := os.WriteFile(bad, []byte("not a Parquet file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	splits := append(plan.Ranks[0], Split{URI: bad, Format: FormatParquet, Rows: 10})
	p, err := NewPipeline(newResolver(), PipelineConfig{Splits: splits, Schema: plan.Schema, LabelColumn: "label", BatchRows: 100, EvenBatches: EvenOff})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := p.Epoch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows int64
	for {
		rec, err := r.Next(ctx)
		if err == nil {
			rows += rec.NumRows()
			rec.Release()
			continue
		}
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), bad) {
			t.Fatalf("after %d rows: %v, want ErrInput naming %s", rows, err, bad)
		}
		break
	}
	if rows != 1000 {
		t.Errorf("%d rows before the damaged split's error, want the first split's 1000", rows)
	}
}

// TestSplitAheadClosedWithEpoch: an epoch closed while its next split is
// open ahead, its decoders running, closes that split too: every
// goroutine the epoch started ends.
func TestSplitAheadClosedWithEpoch(t *testing.T) {
	dir := aheadFiles(t, 3, 20_000)
	ctx := context.Background()
	p := plannedPipeline(t, newResolver(), dir, PipelineConfig{BatchRows: 1000, EvenBatches: EvenOff, Prefetch: 2, DecodeWorkers: 2})
	defer p.Close()
	// Goroutines of earlier tests (gRPC connections closing) may still be
	// ending: count from a number that holds still.
	before := settledGoroutines()
	r, err := p.Epoch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	// The read-ahead goroutine, a decoder of the split being read and
	// one of the split opened ahead.
	waitGoroutines(t, func(n int) bool { return n >= before+3 }, "the epoch's read-ahead and both splits' decoders to start")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, func(n int) bool { return n <= before }, "the epoch's goroutines to end")
}

// settledGoroutines returns the number of goroutines once it has not
// changed for 100 ms (or after 5 s).
func settledGoroutines() int {
	n, since := runtime.NumGoroutine(), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Since(since) < 100*time.Millisecond && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		if m := runtime.NumGoroutine(); m != n {
			n, since = m, time.Now()
		}
	}
	return n
}

// waitGoroutines waits up to 5 s (scaled) for the number of goroutines to
// satisfy ok, failing the test with what it waited for.
func waitGoroutines(t *testing.T, ok func(int) bool, what string) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, func() error {
		if n := runtime.NumGoroutine(); !ok(n) {
			return fmt.Errorf("%d goroutines: no %s yet", n, what)
		}
		return nil
	})
}

// TestSplitAheadNotPastLimit: a split whose rows end the epoch (its row
// limit) opens no other ahead.
func TestSplitAheadNotPastLimit(t *testing.T) {
	dir := aheadFiles(t, 3, 1000)
	p := plannedPipeline(t, newResolver(), dir, PipelineConfig{BatchRows: 100, EvenBatches: EvenOff})
	defer p.Close()
	for _, tc := range []struct {
		limit int64
		ahead bool
	}{{1000, false}, {1500, true}, {-1, true}} {
		s := &splitStream{p: p, order: []int{0, 1, 2}, limit: tc.limit, cycle: tc.limit >= 0}
		rec, err := s.next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if got := s.ahead != nil; got != tc.ahead {
			t.Errorf("limit %d: a split opened ahead: %v, want %v", tc.limit, got, tc.ahead)
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
}
