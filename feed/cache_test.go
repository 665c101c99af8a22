package feed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A cached epoch yields exactly the batches of an uncached one, in every
// format, with and without shuffling, padding and read-ahead, and leaks no
// buffer (newTestPipeline checks the allocator).
func TestCacheYieldsTheSameBatches(t *testing.T) {
	withCSVChunk(t, 512)
	for _, format := range []Format{FormatParquet, FormatArrow, FormatCSV} {
		for _, shuffle := range []bool{false, true} {
			for _, even := range []EvenMode{EvenOff, EvenPad} {
				t.Run(fmt.Sprintf("%s/shuffle=%v/even=%s", format, shuffle, even), func(t *testing.T) {
					plan := planFiles(t, format, 700, 2)
					mod := func(cache int64) func(*PipelineConfig) {
						return func(c *PipelineConfig) {
							c.Shuffle, c.ShuffleBufferRows, c.Seed, c.Prefetch = shuffle, 50, 3, 2
							c.EvenBatches, c.TargetBatches, c.CacheBytes = even, 0, cache
							if even != EvenOff {
								c.TargetBatches = 30 // more than the rank holds: padding cycles the splits
							}
						}
					}
					plain := newTestPipeline(t, plan, 1, mod(0))
					cached := newTestPipeline(t, plan, 1, mod(64<<20))
					for epoch := range 3 {
						want, wantSizes := epochIDs(t, plain, epoch)
						got, gotSizes := epochIDs(t, cached, epoch)
						if !slices.Equal(got, want) || !slices.Equal(gotSizes, wantSizes) {
							t.Fatalf("epoch %d: cached pipeline yields other rows or batches", epoch)
						}
					}
					st := cached.Stats()
					if st.CachedSplits != len(plan.Ranks[1]) || st.CacheHits == 0 {
						t.Fatalf("cache stats %+v: want all %d splits cached and hits", st, len(plan.Ranks[1]))
					}
					if ps := plain.Stats(); ps.CacheHits != 0 || ps.CachedSplits != 0 {
						t.Fatalf("pipeline without a cache reports %+v", ps)
					}
				})
			}
		}
	}
}

// Later epochs come from memory: once the files are gone the cached
// splits still read, and only splits that did not fit need their files.
func TestCacheServesLaterEpochsFromMemory(t *testing.T) {
	plan := planFiles(t, FormatParquet, 600, 1)
	if len(plan.Ranks[0]) < 2 {
		t.Fatalf("want several splits, got %d", len(plan.Ranks[0]))
	}

	full := newTestPipeline(t, plan, 0, func(c *PipelineConfig) { c.CacheBytes = 64 << 20 })
	first, _ := epochIDs(t, full, 0)

	// Room for some splits only.
	var small int64
	{
		probe := newTestPipeline(t, plan, 0, func(c *PipelineConfig) { c.CacheBytes = 64 << 20 })
		epochIDs(t, probe, 0)
		st := probe.Stats()
		small = st.CachedBytes / 2
	}
	partial := newTestPipeline(t, plan, 0, func(c *PipelineConfig) { c.CacheBytes = small })
	epochIDs(t, partial, 0)
	pst := partial.Stats()
	if pst.CachedSplits == 0 || pst.CachedSplits == len(plan.Ranks[0]) || pst.CachedBytes > small {
		t.Fatalf("cache of %d bytes holds %+v; want some but not all %d splits, within the limit",
			small, pst, len(plan.Ranks[0]))
	}

	for _, s := range plan.Ranks[0] {
		path := strings.TrimPrefix(s.URI, "file://")
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	again, _ := epochIDs(t, full, 1)
	if !slices.Equal(again, first) {
		t.Fatal("epoch 1 from the cache differs from epoch 0")
	}
	r, err := partial.Epoch(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next(t.Context())
		if err != nil {
			if !os.IsNotExist(err) && !strings.Contains(err.Error(), "no such file") {
				t.Fatalf("reading an uncached split of a deleted file: %v, want not found", err)
			}
			break
		}
		rec.Release()
	}
}

// A split cut short (the epoch closed early) is not cached half read; one
// read to its last planned row is, even without its end; and the cache
// holds no more than its limit.
func TestCacheTakesWholeSplitsOnly(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var told []bool // what each open was told
	open := func(recorded bool) (Reader, error) {
		told = append(told, recorded)
		var recs []arrow.RecordBatch
		for i := range int64(3) {
			recs = append(recs, testRecordWith(mem, testSchema, 10*i, 10))
		}
		return &cachedReader{schema: testSchema, recs: recs}, nil // a reader over batches made in advance
	}
	read := func(r Reader, n int) {
		for range n {
			rec, err := r.Next(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
	}
	c := newSplitCache(1<<20, nil, nil)
	defer c.close()

	r, _ := c.open(0, 30, false, open)
	read(r, 2)
	r.Close()
	if n, _ := c.stats(); n != 0 {
		t.Fatalf("a split closed after 2 of its 3 batches was cached")
	}

	r, _ = c.open(0, 30, false, open)
	read(r, 3) // its last row, not its end
	r.Close()
	if n, _ := c.stats(); n != 1 {
		t.Fatalf("a split read to its last planned row was not cached")
	}
	opened := 0
	r, _ = c.open(0, 30, false, func(recorded bool) (Reader, error) { opened++; return open(recorded) })
	if opened != 0 || c.hits.Load() != 1 {
		t.Fatalf("split 0 read from its source (%d opens, %d hits), want it from the cache", opened, c.hits.Load())
	}
	read(r, 3)
	if _, err := r.Next(t.Context()); !errors.Is(err, io.EOF) {
		t.Fatalf("after the cached batches: %v, want EOF", err)
	}
	r.Close()

	if !slices.Equal(told, []bool{true, true}) {
		t.Fatalf("the reader opens were told they would be recorded: %v, want true twice", told)
	}
	full := newSplitCache(1<<20, nil, nil)
	defer full.close()
	full.used = full.limit
	r, _ = full.open(1, 30, false, open)
	r.Close()
	if told[len(told)-1] {
		t.Fatal("a full cache told the reader it opened that it would be recorded")
	}

	small := newSplitCache(100, nil, nil) // less than one batch
	defer small.close()
	r, _ = small.open(0, 30, false, open)
	read(r, 3)
	r.Close()
	if n, b := small.stats(); n != 0 || b != 0 {
		t.Fatalf("a cache of 100 bytes holds %d splits, %d bytes", n, b)
	}
	// The split that outgrew the room is not recorded again (and so is
	// read into batch memory, when there is some); another one is.
	for _, split := range []int{0, 1} {
		r, _ = small.open(split, 30, false, open)
		read(r, 3)
		r.Close()
	}
	if got := told[len(told)-2:]; !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("after split 0 outgrew the cache, its open and another's were told %v, want false, true", got)
	}
}

func TestCacheBytesMustNotBeNegative(t *testing.T) {
	plan := planFiles(t, FormatParquet, 100, 1)
	_, err := NewPipeline(newResolver(), PipelineConfig{Splits: plan.Ranks[0], Schema: plan.Schema, BatchRows: 8, CacheBytes: -1})
	if err == nil || !strings.Contains(err.Error(), "cache bytes") {
		t.Fatalf("negative cache: %v", err)
	}
}

// An epoch that ends at its row limit never asks the last split for its
// end; that split is whole all the same and is cached.
func TestCacheKeepsSplitsEndingAtTheRowLimit(t *testing.T) {
	plan := planFiles(t, FormatParquet, 700, 2)
	rows := plan.RowsPerRank[1]
	p := newTestPipeline(t, plan, 1, func(c *PipelineConfig) {
		c.BatchRows, c.EvenBatches, c.TargetBatches, c.CacheBytes = int(rows/7), EvenPad, 7, 64<<20
	})
	if rows%7 != 0 {
		t.Fatalf("rank 1 has %d rows; the test wants a multiple of 7", rows)
	}
	first, _ := epochIDs(t, p, 0)
	if st := p.Stats(); st.CachedSplits != len(plan.Ranks[1]) {
		t.Fatalf("cache holds %+v, want all %d splits", st, len(plan.Ranks[1]))
	}
	again, _ := epochIDs(t, p, 1)
	if !slices.Equal(first, again) {
		t.Fatal("the cached epoch differs")
	}
	if st := p.Stats(); st.CacheHits != int64(len(plan.Ranks[1])) {
		t.Fatalf("stats %+v: want every split of epoch 1 from the cache", st)
	}
}

// A cached batch that slices a page (flatColumns.pageValues) keeps the
// whole page alive: the page counts once, in full, however many batches
// slice it, and other buffers count as they are.
func TestHeldBytesCountsSlicedPages(t *testing.T) {
	page := memory.NewResizableBuffer(memory.DefaultAllocator)
	page.Resize(4000)
	defer page.Release()
	batch := func(buf *memory.Buffer, rows int) arrow.RecordBatch {
		data := array.NewData(arrow.PrimitiveTypes.Float32, rows, []*memory.Buffer{nil, buf}, nil, 0, 0)
		defer data.Release()
		col := array.MakeFromData(data)
		defer col.Release()
		schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float32}}, nil)
		return array.NewRecordBatch(schema, []arrow.Array{col}, int64(rows))
	}
	first, second := memory.SliceBuffer(page, 0, 1200), memory.SliceBuffer(page, 1200, 1200)
	defer first.Release()
	defer second.Release()
	copied := memory.NewBufferBytes(make([]byte, 800))
	parents := map[*memory.Buffer]bool{}
	var held int64
	for _, b := range []struct {
		buf  *memory.Buffer
		want int64
	}{{first, int64(page.Cap())}, {second, 0}, {copied, 800}} {
		rec := batch(b.buf, b.buf.Len()/4)
		got := heldBytes(rec, parents)
		rec.Release()
		if got != b.want {
			t.Errorf("a batch of %d bytes holds %d, want %d", b.buf.Len(), got, b.want)
		}
		held += got
	}
	if held < 4000+800 {
		t.Errorf("the batches hold %d bytes, want the page's 4000 and the copy's 800 at least", held)
	}
}
