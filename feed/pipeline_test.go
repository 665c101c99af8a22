package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spindle-ml/spindle/internal/testutil"
	"go.uber.org/goleak"
)

// planFiles writes a few files holding rows 0..rows-1 and plans them.
func planFiles(t *testing.T, format Format, rows int64, ranks int) *JobPlan {
	t.Helper()
	dir := t.TempDir()
	var start int64
	for i, n := range []int64{rows / 2, rows - rows/2 - rows/5, rows / 5} {
		p := filepath.Join(dir, fmt.Sprintf("part-%d.%s", i, format))
		switch format {
		case FormatParquet:
			writeParquet(t, p, testSchema, start, n, 23)
		case FormatArrow:
			writeArrow(t, p, start, n, 23)
		case FormatCSV:
			writeText(t, p, csvText(start, n, true))
		}
		start += n
	}
	plan, err := Plan(context.Background(), newResolver(), PlanRequest{Inputs: []string{dir}, Ranks: ranks, LabelColumn: "label"})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// epochIDs reads one epoch and returns its row ids and batch sizes.
func epochIDs(t *testing.T, p *Pipeline, epoch int) (ids []int64, sizes []int64) {
	t.Helper()
	r, err := p.Epoch(context.Background(), epoch)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return ids, sizes
		}
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Schema().Equal(p.Schema()) {
			t.Fatalf("batch schema %v, want %v", rec.Schema(), p.Schema())
		}
		a := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		lab := rec.Column(int(rec.NumCols()) - 1).(*array.Int64)
		for i := 0; i < a.Len(); i++ {
			if lab.Value(i) != a.Value(i)%2 {
				t.Fatalf("row %d: label %d travelled apart from its row", a.Value(i), lab.Value(i))
			}
			ids = append(ids, a.Value(i))
		}
		sizes = append(sizes, rec.NumRows())
		rec.Release()
	}
}

func newTestPipeline(t *testing.T, plan *JobPlan, rank int, mod func(*PipelineConfig)) *Pipeline {
	t.Helper()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cfg := PipelineConfig{Splits: plan.Ranks[rank], Schema: plan.Schema, LabelColumn: "label", BatchRows: 16,
		Rank: rank, EvenBatches: EvenOff, Allocator: alloc}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewPipeline(newResolver(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.pool != nil {
		// Reused buffers hold old data: prove that nothing reads a byte
		// it did not write.
		p.pool.poison = true
	}
	t.Cleanup(func() {
		p.Close()
		alloc.AssertSize(t, 0)
	})
	return p
}

func TestPipelineEveryRowOnce(t *testing.T) {
	withCSVChunk(t, 512)
	for _, format := range []Format{FormatParquet, FormatArrow, FormatCSV} {
		for _, prefetch := range []int{0, 3} {
			for _, shuffle := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/prefetch=%d/shuffle=%v", format, prefetch, shuffle), func(t *testing.T) {
					const rows, ranks = 1000, 3
					plan := planFiles(t, format, rows, ranks)
					var all []int64
					for rank := 0; rank < ranks; rank++ {
						p := newTestPipeline(t, plan, rank, func(c *PipelineConfig) {
							c.Prefetch, c.MemoryBudget, c.Shuffle, c.ShuffleBufferRows, c.Seed = prefetch, 4096, shuffle, 100, 7
						})
						for epoch := 0; epoch < 2; epoch++ {
							ids, sizes := epochIDs(t, p, epoch)
							if int64(len(ids)) != plan.RowsPerRank[rank] {
								t.Errorf("rank %d epoch %d: %d rows, want %d", rank, epoch, len(ids), plan.RowsPerRank[rank])
							}
							for i, n := range sizes {
								if n != 16 && i != len(sizes)-1 {
									t.Fatalf("rank %d: batch %d of %d has %d rows, want 16", rank, i, len(sizes), n)
								}
							}
							if epoch == 0 {
								all = append(all, ids...)
							}
						}
						if st := p.Stats(); st.Rows != 2*plan.RowsPerRank[rank] {
							t.Errorf("rank %d stats %+v", rank, st)
						}
					}
					checkAllOnce(t, all, rows)
				})
			}
		}
	}
}

func TestPipelineShuffleDeterminism(t *testing.T) {
	plan := planFiles(t, FormatParquet, 600, 2)
	read := func(seed int64, rank, epoch int) []int64 {
		p := newTestPipeline(t, plan, rank, func(c *PipelineConfig) {
			c.Shuffle, c.Seed, c.ShuffleBufferRows, c.Prefetch = true, seed, 64, 2
		})
		ids, _ := epochIDs(t, p, epoch)
		return ids
	}
	base := read(42, 0, 1)
	if slices.IsSorted(base) {
		t.Fatal("a shuffled epoch came out in file order")
	}
	sorted := slices.Clone(base)
	slices.Sort(sorted)
	plain := newTestPipeline(t, plan, 0, nil)
	inOrder, _ := epochIDs(t, plain, 1)
	if !slices.Equal(sorted, inOrder) {
		t.Fatal("shuffling changed which rows the rank reads")
	}
	tests := []struct {
		name        string
		seed        int64
		rank, epoch int
		same        bool
	}{
		{"same seed, epoch and rank", 42, 0, 1, true},
		{"other seed", 43, 0, 1, false},
		{"other epoch", 42, 0, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := read(tt.seed, tt.rank, tt.epoch)
			if slices.Equal(got, base) != tt.same {
				t.Errorf("order equal to the base order: %v, want %v", !tt.same, tt.same)
			}
		})
	}
}

func TestPipelineEvenBatches(t *testing.T) {
	// 19 rows over 2 ranks: 10 and 9.
	plan := planFiles(t, FormatParquet, 19, 2)
	if plan.RowsPerRank[0] != 10 || plan.RowsPerRank[1] != 9 {
		t.Fatalf("RowsPerRank = %v", plan.RowsPerRank)
	}
	rankRows := func(rank int) map[int64]bool {
		p := newTestPipeline(t, plan, rank, func(c *PipelineConfig) { c.BatchRows = 4 })
		ids, _ := epochIDs(t, p, 0)
		m := map[int64]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	own := []map[int64]bool{rankRows(0), rankRows(1)}
	tests := []struct {
		mode    EvenMode
		target  int64 // 0: from the plan
		shuffle bool
		sizes   [2][]int64
	}{
		{EvenOff, 0, false, [2][]int64{{4, 4, 2}, {4, 4, 1}}},
		// Both ranks already make 3 batches: pad equalises counts only.
		{EvenPad, 0, false, [2][]int64{{4, 4, 2}, {4, 4, 1}}},
		{EvenPad, 0, true, [2][]int64{{4, 4, 2}, {4, 4, 1}}},
		{EvenDrop, 0, false, [2][]int64{{4, 4}, {4, 4}}},
		{EvenPad, 7, false, [2][]int64{{4, 4, 4, 4, 4, 4, 4}, {4, 4, 4, 4, 4, 4, 4}}}, // pads past a whole copy
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/target=%d/shuffle=%v", tt.mode, tt.target, tt.shuffle), func(t *testing.T) {
			target := tt.target
			if target == 0 {
				target = EvenTarget(plan.RowsPerRank, 4, tt.mode)
			}
			for rank := 0; rank < 2; rank++ {
				p := newTestPipeline(t, plan, rank, func(c *PipelineConfig) {
					c.BatchRows, c.EvenBatches, c.TargetBatches, c.Shuffle, c.Prefetch = 4, tt.mode, target, tt.shuffle, 2
					if tt.target == 0 {
						c.EpochRows = EvenRows(plan.RowsPerRank, rank, 4, tt.mode)
					}
				})
				ids, sizes := epochIDs(t, p, 0)
				if !slices.Equal(sizes, tt.sizes[rank]) {
					t.Errorf("rank %d: batch sizes %v, want %v", rank, sizes, tt.sizes[rank])
				}
				seen := map[int64]int{}
				for _, id := range ids {
					if !own[rank][id] {
						t.Errorf("rank %d yielded row %d of another rank", rank, id)
					}
					seen[id]++
				}
				if tt.mode == EvenPad && len(seen) != len(own[rank]) {
					t.Errorf("rank %d: padding lost rows: saw %d distinct, own %d", rank, len(seen), len(own[rank]))
				}
			}
		})
	}
}

// A rank with fewer batches than the target is padded to the largest
// rank's rows: the same batch count, the last batch as short as theirs.
func TestPipelinePadsToTheLargestRank(t *testing.T) {
	plan := planFiles(t, FormatParquet, 19, 2) // ranks of 10 and 9 rows
	p := newTestPipeline(t, plan, 1, func(c *PipelineConfig) {
		c.BatchRows, c.EvenBatches, c.TargetBatches, c.EpochRows = 4, EvenPad, 4, 14
	})
	if _, sizes := epochIDs(t, p, 0); !slices.Equal(sizes, []int64{4, 4, 4, 2}) {
		t.Fatalf("batch sizes %v, want [4 4 4 2]", sizes)
	}
}

func TestEvenRowsAndCheck(t *testing.T) {
	tests := []struct {
		rows  []int64
		batch int
		mode  EvenMode
		want  []int64
	}{
		{[]int64{500, 500}, 1024, EvenPad, []int64{500, 500}}, // 1,000 rows on 2 ranks feed 1,000, not 2,048
		{[]int64{10, 9}, 4, EvenPad, []int64{10, 9}},
		{[]int64{10, 5}, 4, EvenPad, []int64{10, 10}},
		{[]int64{10, 9}, 4, EvenDrop, []int64{8, 8}},
		{[]int64{10, 9}, 4, EvenOff, []int64{10, 9}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%d/%s", tt.rows, tt.batch, tt.mode), func(t *testing.T) {
			for rank := range tt.rows {
				if got := EvenRows(tt.rows, rank, tt.batch, tt.mode); got != tt.want[rank] {
					t.Errorf("EvenRows rank %d = %d, want %d", rank, got, tt.want[rank])
				}
			}
		})
	}
	err := CheckEven([]int64{3000, 600}, 1024, EvenDrop)
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "rank 1 holds 600 rows") {
		t.Errorf("drop with a rank under one batch: err = %v", err)
	}
	for _, ok := range []struct {
		rows []int64
		mode EvenMode
	}{{[]int64{3000, 600}, EvenPad}, {[]int64{3000, 2000}, EvenDrop}, {[]int64{0, 0}, EvenDrop}} {
		if err := CheckEven(ok.rows, 1024, ok.mode); err != nil {
			t.Errorf("CheckEven(%v, %s) = %v, want nil", ok.rows, ok.mode, err)
		}
	}
}

func TestEvenTarget(t *testing.T) {
	tests := []struct {
		rows  []int64
		batch int
		mode  EvenMode
		want  int64
	}{
		{[]int64{10, 9}, 4, EvenPad, 3},
		{[]int64{10, 9}, 4, EvenDrop, 2},
		{[]int64{10, 9}, 4, EvenOff, 0},
		{[]int64{8, 8}, 4, EvenPad, 2},
		{[]int64{3, 2}, 4, EvenDrop, 0},
		{nil, 4, EvenPad, 0},
	}
	for _, tt := range tests {
		if got := EvenTarget(tt.rows, tt.batch, tt.mode); got != tt.want {
			t.Errorf("EvenTarget(%v, %d, %s) = %d, want %d", tt.rows, tt.batch, tt.mode, got, tt.want)
		}
	}
	for in, want := range map[string]EvenMode{"": EvenPad, "PAD": EvenPad, "drop": EvenDrop, "off": EvenOff} {
		if got, err := ParseEvenMode(in); err != nil || got != want {
			t.Errorf("ParseEvenMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseEvenMode("sometimes"); err == nil {
		t.Error("ParseEvenMode accepted a bad mode")
	}
}

func TestPipelinePrefetchLifecycle(t *testing.T) {
	plan := planFiles(t, FormatParquet, 2000, 1)
	// The bytes of one batch, for the budget test.
	r, err := OpenSplit(context.Background(), newResolver(), plan.Ranks[0][0], ReadOptions{Schema: plan.Schema, LabelColumn: "label", BatchRows: 16})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	oneBatch := BatchBytes(rec)
	rec.Release()
	r.Close()

	tests := []struct {
		name string
		run  func(t *testing.T, p *Pipeline)
	}{
		{"close mid epoch", func(t *testing.T, p *Pipeline) {
			r, err := p.Epoch(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := r.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rec.Release()
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Next(context.Background()); err == nil {
				t.Error("Next after Close succeeded")
			}
		}},
		{"cancel the epoch", func(t *testing.T, p *Pipeline) {
			ctx, cancel := context.WithCancel(context.Background())
			r, err := p.Epoch(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cancel()
			for {
				rec, err := r.Next(context.Background())
				if err == nil {
					rec.Release() // prepared before the cancel
					continue
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
				break
			}
		}},
		{"cancel a waiting consumer", func(t *testing.T, p *Pipeline) {
			r, err := p.Epoch(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			// Either a prepared batch or the cancellation; never a hang.
			if rec, err := r.Next(ctx); err == nil {
				rec.Release()
			} else if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v", err)
			}
		}},
		{"pipeline close closes readers", func(t *testing.T, p *Pipeline) {
			r, err := p.Epoch(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			p.Close()
			if _, err := r.Next(context.Background()); err == nil {
				t.Error("Next on a reader of a closed pipeline succeeded")
			}
			if _, err := p.Epoch(context.Background(), 1); err == nil {
				t.Error("Epoch on a closed pipeline succeeded")
			}
		}},
		{"budget bounds read-ahead", func(t *testing.T, p *Pipeline) {
			r, err := p.Epoch(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			pre := r.(*epochReader).pre
			// The budget holds two batches, not three.
			testutil.WaitFor(t, 10*time.Second, testutil.Holds("two prepared batches", func() bool { return len(pre.ch) == 2 }))
			if pre.sem.TryAcquire(oneBatch) {
				pre.sem.Release(oneBatch)
				t.Fatalf("the budget has room with %d batches prepared; the producer should be waiting", len(pre.ch))
			}
			if len(pre.ch) != 2 {
				t.Fatalf("%d batches prepared, want 2", len(pre.ch))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			p := newTestPipeline(t, plan, 0, func(c *PipelineConfig) {
				c.Prefetch = 50
				c.MemoryBudget = 5 * oneBatch / 2 // later batches are a little larger
			})
			tt.run(t, p)
			p.Close()
		})
	}
}
