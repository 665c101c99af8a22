package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/fsys"
)

func TestClassSize(t *testing.T) {
	for n := minPooled; n <= 1<<22; n += n/7 + 61 {
		c := classSize(n)
		if c < n || c > n+n/4+1 {
			t.Fatalf("classSize(%d) = %d: want within a quarter above", n, c)
		}
		if !pooled(c) || classSize(c) != c {
			t.Fatalf("classSize(%d) = %d is not a class of its own", n, c)
		}
	}
	for _, n := range []int{1, minPooled - 1, maxPooled + 1} {
		if pooled(n) {
			t.Errorf("pooled(%d) = true outside the pooled range", n)
		}
	}
}

func TestBufferPool(t *testing.T) {
	base := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	tests := []struct {
		name string
		run  func(t *testing.T, p *bufferPool, under *memory.CheckedAllocator)
	}{
		{"a freed buffer is handed out again", func(t *testing.T, p *bufferPool, _ *memory.CheckedAllocator) {
			a := p.Allocate(100_000)
			p.Free(a)
			b := p.Allocate(99_000)
			if base(a) != base(b) || len(b) != 99_000 {
				t.Errorf("got a new buffer (len %d) for a size in the freed one's class", len(b))
			}
			if p.reused.Load() != 1 || p.fresh.Load() != 1 {
				t.Errorf("reused %d fresh %d, want 1 and 1", p.reused.Load(), p.fresh.Load())
			}
			p.Free(b)
		}},
		{"another class is not reused", func(t *testing.T, p *bufferPool, _ *memory.CheckedAllocator) {
			a := p.Allocate(100_000)
			p.Free(a)
			b := p.Allocate(300_000)
			if base(a) == base(b) {
				t.Error("a 300 kB request got a buffer of 100 kB's class")
			}
			p.Free(b)
		}},
		{"reallocate keeps the contents", func(t *testing.T, p *bufferPool, _ *memory.CheckedAllocator) {
			a := p.Allocate(10_000)
			for i := range a {
				a[i] = byte(i)
			}
			b := p.Reallocate(1_000_000, a)
			for i := 0; i < 10_000; i++ {
				if b[i] != byte(i) {
					t.Fatalf("byte %d is %d after reallocate", i, b[i])
				}
			}
			if c := p.Reallocate(500, b); base(c) != base(b) || len(c) != 500 {
				t.Error("shrinking moved the buffer")
			}
			p.Free(b)
		}},
		{"small and huge buffers bypass the pool", func(t *testing.T, p *bufferPool, under *memory.CheckedAllocator) {
			s := p.Allocate(100)
			p.Free(s)
			if p.held != 0 || under.CurrentAlloc() != 0 {
				t.Errorf("a small buffer was kept (held %d, underlying %d)", p.held, under.CurrentAlloc())
			}
			h := p.Allocate(maxPooled + 1)
			p.Free(h)
			if p.held != 0 || under.CurrentAlloc() != 0 {
				t.Errorf("a huge buffer was kept (held %d, underlying %d)", p.held, under.CurrentAlloc())
			}
		}},
		{"the limit bounds what is kept", func(t *testing.T, p *bufferPool, under *memory.CheckedAllocator) {
			var bufs [][]byte
			for range 10 {
				bufs = append(bufs, p.Allocate(256<<10))
			}
			for _, b := range bufs {
				p.Free(b)
			}
			if p.held > p.limit {
				t.Errorf("held %d bytes over a limit of %d", p.held, p.limit)
			}
			if int64(under.CurrentAlloc()) != p.held {
				t.Errorf("the underlying allocator holds %d bytes, the pool %d", under.CurrentAlloc(), p.held)
			}
		}},
		{"close gives everything back", func(t *testing.T, p *bufferPool, under *memory.CheckedAllocator) {
			a, b := p.Allocate(50_000), p.Allocate(70_000)
			p.Free(a)
			p.close()
			if under.CurrentAlloc() != len(b[:cap(b)]) {
				t.Errorf("after close the underlying allocator holds %d bytes, want only the one live buffer", under.CurrentAlloc())
			}
			p.Free(b) // after close: straight back
		}},
		{"poison fills reused buffers", func(t *testing.T, p *bufferPool, _ *memory.CheckedAllocator) {
			p.poison = true
			a := p.Allocate(10_000)
			clear(a)
			p.Free(a)
			b := p.Allocate(10_000)
			if b[0] != 0xa5 || b[len(b)-1] != 0xa5 {
				t.Error("a reused buffer was not poisoned")
			}
			p.Free(b)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			under := memory.NewCheckedAllocator(memory.NewGoAllocator())
			p := newBufferPool(under, 1<<20)
			tt.run(t, p, under)
			p.close()
			under.AssertSize(t, 0)
		})
	}
}

// mixedSchema has the column kinds whose decoding could trip over
// buffers that are not zeroed: nulls, strings, dictionaries, lists,
// booleans.
var mixedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "f", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "cat", Type: arrow.BinaryTypes.String},
	{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// writeMixedParquet writes rows rows of mixedSchema in row groups of
// rgRows, dictionary-encoding "cat", with pages of about 4 kB.
func writeMixedParquet(t *testing.T, path string, rows, rgRows int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(rgRows)), parquet.WithDataPageSize(4096),
		parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(false),
		parquet.WithDictionaryFor("cat", true))
	w, err := pqarrow.NewFileWriter(mixedSchema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	b := array.NewRecordBuilder(memory.DefaultAllocator, mixedSchema)
	defer b.Release()
	for i := 0; i < rows; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if fb := b.Field(1).(*array.Float32Builder); i%5 == 0 {
			fb.AppendNull()
		} else {
			fb.Append(float32(rng.NormFloat64()))
		}
		if sb := b.Field(2).(*array.StringBuilder); i%7 == 0 {
			sb.AppendNull()
		} else {
			sb.Append(fmt.Sprintf("row %d %s", i, string(rune('a'+i%26))))
		}
		b.Field(3).(*array.StringBuilder).Append([]string{"red", "green", "blue"}[i%3])
		lb := b.Field(4).(*array.ListBuilder)
		if i%11 == 0 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for k := 0; k < i%4; k++ {
				lb.ValueBuilder().(*array.Int32Builder).Append(int32(i + k))
			}
		}
		if bb := b.Field(5).(*array.BooleanBuilder); i%3 == 0 {
			bb.AppendNull()
		} else {
			bb.Append(i%2 == 0)
		}
		b.Field(6).(*array.Int64Builder).Append(int64(i % 2))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.WriteBuffered(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// readPlain reads rows [from, from+n) of a Parquet file with plain
// pqarrow and zeroed memory: the reference.
func readPlain(t *testing.T, path string, from, n int64) arrow.RecordBatch {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, tbl.NumRows())
	defer tr.Release()
	tr.Next()
	return tr.RecordBatch().NewSlice(from, from+n)
}

// expand returns a dictionary array's values as a plain array (released
// with the test), and any other array as it is.
func expand(t *testing.T, a arrow.Array) arrow.Array {
	d, ok := a.(*array.Dictionary)
	if !ok {
		return a
	}
	out, err := compute.TakeArray(context.Background(), d.Dictionary(), d.Indices())
	if err != nil {
		t.Fatalf("expand a dictionary array: %v", err)
	}
	t.Cleanup(out.Release)
	return out
}

// TestPooledDecode reads Parquet through a pool that poisons every
// buffer it hands out, with one and several decode goroutines, from a
// local file and through the remote path's chunk cache, and checks that
// every value equals what plain pqarrow reads.
func TestPooledDecode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mixed.parquet")
	const rows, rgRows = 5000, 1200
	writeMixedParquet(t, path, rows, rgRows)
	tests := []struct {
		split     Split
		workers   int
		remote    bool
		batchRows int // 512 when zero
	}{
		{Split{RowGroups: []int{0, 1, 2, 3, 4}, Rows: rows}, 1, false, 0},
		{Split{RowGroups: []int{0, 1, 2, 3, 4}, Rows: rows}, 3, false, 0},
		{Split{RowGroups: []int{0, 1, 2, 3, 4}, Rows: rows}, 3, true, 0},
		{Split{RowGroups: []int{1, 2}, RowOffset: 300, Rows: 1500}, 1, true, 0},
		{Split{RowGroups: []int{1, 2}, RowOffset: 300, Rows: 1500}, 7, false, 0},
		{Split{RowGroups: []int{3}, RowOffset: 1000, Rows: 200}, 2, true, 0},
		// Batches larger than the row groups: pqarrow reaches a row
		// group's end within a batch (where it once left a list's first
		// offset unwritten).
		{Split{RowGroups: []int{0, 1, 2, 3, 4}, Rows: rows}, 1, false, 4096},
		{Split{RowGroups: []int{1, 2}, RowOffset: 300, Rows: 1500}, 2, false, 100_000},
	}
	for _, tt := range tests {
		tt.split.URI, tt.split.Format = path, FormatParquet
		if tt.batchRows == 0 {
			tt.batchRows = 512
		}
		name := fmt.Sprintf("rg=%v/offset=%d/workers=%d/remote=%v/batch=%d", tt.split.RowGroups, tt.split.RowOffset, tt.workers, tt.remote, tt.batchRows)
		t.Run(name, func(t *testing.T) {
			checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer checked.AssertSize(t, 0)
			pool := newBufferPool(checked, 8<<20)
			defer pool.close()
			pool.poison = true
			first := int64(tt.split.RowGroups[0]) * rgRows
			want := readPlain(t, path, first+tt.split.RowOffset, tt.split.Rows)
			defer want.Release()
			// Twice, so that the second pass decodes into reused buffers.
			for pass := 0; pass < 2; pass++ {
				f, err := fsys.Local().Open(context.Background(), path)
				if err != nil {
					t.Fatal(err)
				}
				op, err := openParquet(context.Background(), f, tt.split, ReadOptions{BatchRows: tt.batchRows, Allocator: pool, DecodeWorkers: tt.workers}, tt.remote)
				if err != nil {
					f.Close()
					t.Fatal(err)
				}
				// One group per column with several workers, who share them
				// out; with one, pqarrow's columns and flatColumns' (cat, a
				// dictionary-encoded string, f, a float32 with nulls, and id
				// and label, required int64s).
				ps := op.src.(*parquetSource)
				wantGroups := decodeGroups(tt.workers, mixedSchema.NumFields())
				if tt.workers <= 1 {
					wantGroups = 2
				}
				if got := len(ps.groups); got != wantGroups || (tt.workers > 1) != (ps.helpers == tt.workers-1 && tt.workers > 1) {
					t.Errorf("%d column groups and %d helpers, want %d groups and %d helpers", got, ps.helpers, wantGroups, tt.workers-1)
				}
				if got := flatNames(ps); !slices.Equal(got, []string{"cat", "f", "id", "label"}) {
					t.Errorf("flatColumns reads %v, want [cat f id label]", got)
				}
				r := &splitReader{uri: path, opened: *op, left: tt.split.Rows, want: tt.split.Rows}
				off := eachBatch(t, r.Next, func(rec arrow.RecordBatch, off int64) {
					exp := want.NewSlice(off, off+rec.NumRows())
					defer exp.Release()
					if dt := rec.Schema().Field(3).Type; dt.ID() != arrow.DICTIONARY {
						t.Fatalf("the dictionary-encoded column cat is read as %s, want a dictionary", dt)
					}
					for c := 0; c < int(rec.NumCols()); c++ {
						if !array.Equal(expand(t, rec.Column(c)), exp.Column(c)) {
							t.Fatalf("pass %d: rows %d+%d column %s differ:\n got %v\nwant %v", pass, off, rec.NumRows(),
								rec.ColumnName(c), rec.Column(c), exp.Column(c))
						}
					}
				})
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				if off != tt.split.Rows {
					t.Fatalf("read %d rows, want %d", off, tt.split.Rows)
				}
			}
			if pool.reused.Load() == 0 {
				t.Error("no buffer was reused")
			}
		})
	}
}

// TestChunkCacheRelease checks that a remote split closed early, or cut
// inside a row group, gives every cached chunk back.
func TestChunkCacheRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mixed.parquet")
	writeMixedParquet(t, path, 3000, 1000)
	for _, batches := range []int{1, 3} {
		t.Run(fmt.Sprintf("batches=%d", batches), func(t *testing.T) {
			checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
			f, err := fsys.Local().Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			s := Split{URI: path, Format: FormatParquet, RowGroups: []int{0, 1, 2}, Rows: 1500}
			op, err := openParquet(context.Background(), f, s, ReadOptions{BatchRows: 256, Allocator: checked, DecodeWorkers: 2}, true)
			if err != nil {
				f.Close()
				t.Fatal(err)
			}
			r := &splitReader{uri: path, opened: *op, left: s.Rows, want: s.Rows}
			for range batches {
				rec, err := r.Next(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				rec.Release()
			}
			if checked.CurrentAlloc() == 0 {
				t.Fatal("nothing is cached while the split is open")
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			checked.AssertSize(t, 0)
		})
	}
}

// sliceStage hands out batches of a slice.
type sliceStage struct{ recs []arrow.RecordBatch }

func (s *sliceStage) next(context.Context) (arrow.RecordBatch, error) {
	if len(s.recs) == 0 {
		return nil, io.EOF
	}
	rec := s.recs[0]
	s.recs = s.recs[1:]
	return rec, nil
}

func (s *sliceStage) close() error {
	for _, r := range s.recs {
		r.Release()
	}
	s.recs = nil
	return nil
}

// TestShuffleGather checks the row shuffler's gathering, straight from a
// window's batches, against joining them and arrow's take kernel with
// the same permutation.
func TestShuffleGather(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us},
		{Name: "n64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	batch := func(start, n int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i := start; i < start+n; i++ {
			b.Field(0).(*array.Int8Builder).Append(int8(i))
			b.Field(1).(*array.Uint16Builder).Append(uint16(i))
			b.Field(2).(*array.Float32Builder).Append(float32(i) / 4)
			b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(i))
			if i%3 == 0 {
				b.Field(4).(*array.Int64Builder).AppendNull()
			} else {
				b.Field(4).(*array.Int64Builder).Append(int64(i))
			}
			b.Field(5).(*array.StringBuilder).Append(fmt.Sprint(i))
		}
		return b.NewRecordBatch()
	}
	tests := []struct {
		name   string
		sizes  []int
		window int
	}{
		{"one batch", []int{100}, 100},
		{"several batches", []int{40, 7, 53}, 100},
		{"sliced batches", []int{30, 30, 30, 30}, 64},
		{"windows inside one batch", []int{200}, 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer checked.AssertSize(t, 0)
			var in, ref []arrow.RecordBatch
			start := 0
			for _, n := range tt.sizes {
				full := batch(start-3, n+6)
				in = append(in, full.NewSlice(3, int64(n)+3)) // offsets inside the arrays
				ref = append(ref, full.NewSlice(3, int64(n)+3))
				full.Release()
				start += n
			}
			const key = 9
			s := newRowShuffler(&sliceStage{recs: in}, schema, tt.window, key, checked)
			defer s.close()
			// The windows are consecutive runs of exactly tt.window rows of
			// the input, whatever its batches, each in its permutation.
			joined := make([]arrow.Array, schema.NumFields())
			for c := range joined {
				pieces := make([]arrow.Array, len(ref))
				for j, r := range ref {
					pieces[j] = r.Column(c)
				}
				var err error
				if joined[c], err = array.Concatenate(pieces, memory.DefaultAllocator); err != nil {
					t.Fatal(err)
				}
				defer joined[c].Release()
			}
			for _, r := range ref {
				r.Release()
			}
			total := joined[0].Len()
			for w, from := int64(0), 0; from < total; w, from = w+1, from+tt.window {
				rows := min(tt.window, total-from)
				idx := make([]int64, rows)
				permutation(idx, windowKey(key, w), nil)
				for i := range idx {
					idx[i] += int64(from)
				}
				indices := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, rows,
					[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(idx))}, nil, 0, 0))
				got, err := s.next(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for c := 0; c < schema.NumFields(); c++ {
					want, err := compute.TakeArray(context.Background(), joined[c], indices)
					if err != nil {
						t.Fatal(err)
					}
					if !array.Equal(got.Column(c), want) {
						t.Errorf("window %d column %s:\n got %v\nwant %v", w, schema.Field(c).Name, got.Column(c), want)
					}
					want.Release()
				}
				got.Release()
				indices.Release()
			}
			if _, err := s.next(context.Background()); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last window: %v, want io.EOF", err)
			}
		})
	}
}

func TestReadRows(t *testing.T) {
	tests := []struct {
		batch   int
		shuffle bool
		buffer  int
		want    int
	}{
		{1024, false, 0, 16384},
		{1000, false, 0, 17000}, // a multiple: batches are slices, never joined
		{7, false, 0, 16387},
		{20000, false, 0, 20000},
		{1000, true, 0, 16384}, // shuffle windows do not depend on the batch size
		{1000, true, 1, 17000}, // split order only
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("batch=%d/shuffle=%v/buffer=%d", tt.batch, tt.shuffle, tt.buffer), func(t *testing.T) {
			p, err := NewPipeline(newResolver(), PipelineConfig{Schema: testSchema, BatchRows: tt.batch,
				Shuffle: tt.shuffle, ShuffleBufferRows: tt.buffer, EvenBatches: EvenOff})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if got := p.readRows(); got != tt.want {
				t.Errorf("readRows() = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestFooterCache checks that a pipeline reading a file cut into several
// splits parses its footer once over all splits and epochs, feeds the
// same rows as a plain read every epoch, and parses the footer again
// when the file is no longer the same size.
func TestFooterCache(t *testing.T) {
	const rows, rgRows = 3000, 1000
	path := filepath.Join(t.TempDir(), "mixed.parquet")
	writeMixedParquet(t, path, rows, rgRows)
	want := readPlain(t, path, 0, rows)
	defer want.Release()
	splits := make([]Split, 0, rows/rgRows)
	for rg := 0; rg < rows/rgRows; rg++ {
		splits = append(splits, Split{URI: path, Format: FormatParquet, RowGroups: []int{rg}, Rows: rgRows})
	}
	tests := []struct {
		name       string
		workers    int
		prefetch   int
		epochs     int
		wantMisses int64
	}{
		{"one epoch, read on the consumer's goroutine", 0, 0, 1, 1},
		{"three epochs, two decode workers", 2, 4, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPipeline(newResolver(), PipelineConfig{Splits: splits, Schema: mixedSchema, BatchRows: 700,
				Prefetch: tt.prefetch, DecodeWorkers: tt.workers, EvenBatches: EvenOff})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for epoch := 0; epoch < tt.epochs; epoch++ {
				checkEpoch(t, p, epoch, want)
			}
			reads := int64(tt.epochs * len(splits))
			if m, h := p.footers.misses.Load(), p.footers.hits.Load(); m != tt.wantMisses || h != reads-tt.wantMisses {
				t.Errorf("footer parsed %d times and reused %d times over %d split reads, want %d and %d",
					m, h, reads, tt.wantMisses, reads-tt.wantMisses)
			}
		})
	}

	t.Run("a file of another size is parsed again", func(t *testing.T) {
		c := newFooterCache(nil)
		f, err := fsys.Local().Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pf, _, err := openParquetFile(f, path, memory.DefaultAllocator, 0, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.put(footerKey{path, f.Size()}, pf.MetaData())
		if c.get(footerKey{path, f.Size()}) == nil {
			t.Fatal("the footer kept is not found")
		}
		if c.get(footerKey{path, f.Size() + 1}) != nil {
			t.Error("the footer of a file of another size was reused")
		}
	})
}

// checkEpoch reads one epoch of p and checks that its batches are want's
// rows, in order.
func checkEpoch(t *testing.T, p *Pipeline, epoch int, want arrow.RecordBatch) {
	t.Helper()
	ctx := context.Background()
	r, err := p.Epoch(ctx, epoch)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	off := eachBatch(t, r.Next, func(rec arrow.RecordBatch, off int64) {
		exp := want.NewSlice(off, off+rec.NumRows())
		defer exp.Release()
		if !array.RecordEqual(rec, exp) {
			t.Fatalf("epoch %d: rows %d+%d differ from a plain read", epoch, off, rec.NumRows())
		}
	})
	if off != want.NumRows() {
		t.Fatalf("epoch %d fed %d rows, want %d", epoch, off, want.NumRows())
	}
}
