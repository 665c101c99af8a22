package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	feedpq "github.com/spindle-ml/spindle/feed/parquet"
)

// arenaMemory is a BatchMemory over one slice, handed out from its start
// and never reused, each allocation filled with garbage so that nothing
// relies on zeroed memory.
type arenaMemory struct {
	mu      sync.Mutex
	buf     []byte
	next    int
	live    map[uintptr]int
	lent    int64 // bytes handed out and not freed
	handed  int64 // bytes ever handed out
	refused int
}

func newArenaMemory(size int) *arenaMemory {
	return &arenaMemory{buf: make([]byte, size), live: map[uintptr]int{}}
}

func (m *arenaMemory) TryAllocate(size int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := (m.next + 63) &^ 63
	if size <= 0 || at+size > len(m.buf) {
		m.refused++
		return nil
	}
	m.next = at + size
	b := m.buf[at : at+size : at+size]
	for i := range b {
		b[i] = 0xa5
	}
	m.live[uintptr(unsafe.Pointer(&b[0]))] = size
	m.lent += int64(size)
	m.handed += int64(size)
	return b
}

func (m *arenaMemory) Owns(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	p, base := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(&m.buf[0]))
	return p >= base && p < base+uintptr(len(m.buf))
}

func (m *arenaMemory) Free(b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	n, ok := m.live[p]
	if !ok {
		panic("arenaMemory: freed what it did not hand out, or twice")
	}
	delete(m.live, p)
	m.lent -= int64(n)
}

func (m *arenaMemory) counts() (lent, handed int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lent, m.handed
}

// batchPlaces reads one epoch of p and returns its ids, whether every
// buffer of every fixed-width column lay in mem (inMem) or none did
// (outMem), and the bytes of those buffers.
func batchPlaces(t *testing.T, p *Pipeline, epoch int, mem BatchMemory) (ids []int64, inMem, outMem bool, size int64) {
	t.Helper()
	r, err := p.Epoch(context.Background(), epoch)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	inMem, outMem = true, true
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return ids, inMem, outMem, size
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rec.Columns() {
			if _, fixed := c.DataType().(arrow.FixedWidthDataType); !fixed {
				continue // strings are decoded by pqarrow, into its own memory
			}
			for _, b := range c.Data().Buffers() {
				if b == nil || b.Len() == 0 {
					continue
				}
				owned := mem.Owns(b.Bytes())
				inMem, outMem = inMem && owned, outMem && !owned
				size += int64(b.Len())
			}
		}
		a := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		ids = append(ids, a.Int64Values()...)
		rec.Release()
	}
}

// TestPipelineBatchMemory checks that the batches a pipeline yields lie
// in its BatchMemory, whichever stage made them (decoding, the shuffle),
// that nothing else does (the shuffle's windows, the splits the epoch
// cache records), and that the rows are those of a pipeline without it.
func TestPipelineBatchMemory(t *testing.T) {
	plan := planFiles(t, FormatParquet, 3000, 1)
	for _, shuffle := range []bool{false, true} {
		for _, prefetch := range []int{0, 3} {
			for _, cache := range []int64{0, 1 << 20} {
				t.Run(fmt.Sprintf("shuffle=%v/prefetch=%d/cache=%v", shuffle, prefetch, cache > 0), func(t *testing.T) {
					cfg := func(c *PipelineConfig) {
						c.Prefetch, c.Shuffle, c.ShuffleBufferRows, c.Seed, c.BatchRows = prefetch, shuffle, 200, 7, 100
					}
					want, _ := epochIDs(t, newTestPipeline(t, plan, 0, cfg), 0)
					mem := newArenaMemory(8 << 20)
					p := newTestPipeline(t, plan, 0, func(c *PipelineConfig) {
						cfg(c)
						c.BatchMemory, c.CacheBytes = mem, cache
					})
					for epoch := range 2 {
						ids, inMem, outMem, size := batchPlaces(t, p, epoch, mem)
						if epoch == 0 && !slices.Equal(ids, want) || epoch == 1 && !shuffle && !slices.Equal(ids, want) {
							t.Fatalf("epoch %d: ids differ from a pipeline without batch memory", epoch)
						}
						if len(ids) != 3000 {
							t.Fatalf("epoch %d: %d rows, want 3000", epoch, len(ids))
						}
						// Splits the cache records are decoded into the
						// pipeline's memory (it keeps those batches, and
						// would copy them out of batch memory), so with a
						// cache both epochs' read batches are there; shuffled,
						// the batches yielded are gathered into batch memory
						// in any case. (Splits of 1500, 900 and 600 rows make
						// whole 100-row batches, none joined from two.)
						heap := cache > 0 && !shuffle
						switch {
						case heap && !outMem:
							t.Fatalf("epoch %d: a split the cache records was decoded into batch memory", epoch)
						case !heap && !inMem:
							t.Fatalf("epoch %d: a batch's buffer lies outside batch memory", epoch)
						}
						if _, handed := mem.counts(); epoch == 0 && handed > size*5/4 {
							// About what the yielded batches hold: shuffled, the
							// windows the batches are gathered from must not
							// come from it.
							t.Fatalf("epoch 0: batch memory handed out %d bytes for %d bytes of batches", handed, size)
						}
					}
					p.Close()
					if lent, _ := mem.counts(); lent != 0 {
						t.Fatalf("%d bytes of batch memory not given back after Close", lent)
					}
				})
			}
		}
	}
}

// TestCacheRefusesBatchMemory: a split whose batches lie in batch memory
// (strings and all) is not kept by the cache, as the consumer may write
// into them; the same batches built elsewhere are.
func TestCacheRefusesBatchMemory(t *testing.T) {
	mem := newArenaMemory(1 << 20)
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	open := func(alloc memory.Allocator) func(bool) (Reader, error) {
		return func(bool) (Reader, error) {
			b := array.NewRecordBuilder(alloc, sc)
			defer b.Release()
			b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "", "ccc"}, []bool{true, false, true})
			b.Field(1).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
			return &cachedReader{schema: sc, recs: []arrow.RecordBatch{b.NewRecordBatch()}}, nil
		}
	}
	for _, tc := range []struct {
		name  string
		alloc memory.Allocator
		kept  int
	}{{"batch memory", NewBatchAllocator(mem, memory.DefaultAllocator), 0}, {"elsewhere", memory.DefaultAllocator, 1}} {
		c := newSplitCache(1<<20, mem, nil)
		r, err := c.open(0, 3, false, open(tc.alloc))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, r, "x"); !slices.Equal(got, []int64{1, 2, 3}) {
			t.Fatalf("%s: read %v", tc.name, got)
		}
		if n, _ := c.stats(); n != tc.kept {
			t.Fatalf("%s: the cache kept %d splits, want %d", tc.name, n, tc.kept)
		}
		c.close()
	}
	if lent, _ := mem.counts(); lent != 0 {
		t.Fatalf("%d bytes of batch memory still held", lent)
	}
}

// TestFlatColumnsLendingCopies reads pages that hold many batches, which
// flatColumns slices into batches, with and without batch memory: with
// it, every batch is a copy in batch memory instead (the one copy it
// takes on its way to the consumer), with the same values.
func TestFlatColumnsLendingCopies(t *testing.T) {
	const rows, rgRows, pageSize, batchRows = 200_000, 90_000, 256 << 10, 4096
	path := filepath.Join(t.TempDir(), "pages.parquet")
	writeFlatParquetPages(t, path, rows, rgRows, pageSize, compress.Codecs.Snappy, false, false, false)
	f, pf := openParquetTest(t, path)
	read := func(mem BatchMemory) (recs []arrow.RecordBatch, sliced, lent, outside int) {
		var batchAlloc memory.Allocator
		if mem != nil {
			batchAlloc = NewBatchAllocator(mem, memory.DefaultAllocator)
		}
		p := newFlatReader(pf, f, feedpq.ChunkWindow, []int{0, 1, 2}, []int{0, 1, 2, 3}, flatSchema.Fields(), memory.DefaultAllocator, batchAlloc, batchRows)
		defer p.Release()
		for p.Next() {
			rec := p.RecordBatch()
			for _, c := range rec.Columns() {
				values := c.Data().Buffers()[1]
				switch {
				case values.Parent() != nil:
					sliced++
				case mem != nil && mem.Owns(values.Bytes()):
					lent++
				default:
					outside++
				}
			}
			rec.Retain()
			recs = append(recs, rec)
		}
		if err := p.Err(); err != nil {
			t.Fatal(err)
		}
		return recs, sliced, lent, outside
	}
	want, sliced, _, _ := read(nil)
	defer releaseAll(want)
	if sliced == 0 {
		t.Fatal("without batch memory no batch sliced a page: the test reads no such pages")
	}
	mem := newArenaMemory(32 << 20)
	got, sliced, lent, outside := read(mem)
	defer releaseAll(got)
	if sliced != 0 || outside != 0 || lent != len(got)*len(flatSchema.Fields()) {
		t.Fatalf("with batch memory: %d column batches sliced, %d lent, %d elsewhere; want every one lent", sliced, lent, outside)
	}
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !array.RecordEqual(got[i], want[i]) {
			t.Fatalf("batch %d differs with batch memory", i)
		}
	}
}
