package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	feedpq "github.com/spindle-ml/spindle/feed/parquet"
	"github.com/spindle-ml/spindle/feed/parquet/pqtest"
	"github.com/spindle-ml/spindle/fsys"
)

// flatSchema is the file writeFlatParquet writes: the four kinds of
// column flatColumns reads, optional as DuckDB writes them, and one
// required.
var flatSchema = pqtest.FlatSchema

func writeFlatParquet(t *testing.T, path string, rows, rgRows int, codec compress.Compression, v2, nulls, dict bool) {
	t.Helper()
	writeFlatParquetPages(t, path, rows, rgRows, 2048, codec, v2, nulls, dict)
}

// writeFlatParquetPages is writeFlatParquet with pages of about pageSize
// bytes.
func writeFlatParquetPages(t *testing.T, path string, rows, rgRows, pageSize int, codec compress.Compression, v2, nulls, dict bool) {
	t.Helper()
	pqtest.WriteFlat(t, path, rows, rgRows, pageSize, codec, v2, nulls, dict)
}

// flatNames returns the columns a Parquet source reads through
// flatColumns.
func flatNames(ps *parquetSource) []string {
	var names []string
	for _, g := range ps.groups {
		if p, ok := g.rr.(flatReader); ok {
			for _, f := range p.Schema().Fields() {
				names = append(names, f.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// TestFlatColumnsMatchPqarrow reads files of every column kind
// flatColumns reads through it, all of their columns, stored plainly
// and dictionary-encoded, with and without nulls, with both data page
// versions, four codecs, from the start and after a seek, with column
// chunks read whole or through a window smaller than a page, through a
// pool that poisons every buffer, and checks each batch against what
// pqarrow reads.
func TestFlatColumnsMatchPqarrow(t *testing.T) {
	const rows, rgRows = 5000, 1300
	defer func(w int) { feedpq.ChunkWindow = w }(feedpq.ChunkWindow)
	codecs := []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Uncompressed, compress.Codecs.Zstd, compress.Codecs.Gzip}
	for i, v2 := range []bool{false, true, false, true} {
		for _, nulls := range []bool{false, true} {
			for _, dict := range []bool{false, true} {
				codec := codecs[(i+boolInt(nulls))%len(codecs)]
				feedpq.ChunkWindow = []int{1 << 20, 1000}[(i/2+boolInt(nulls))%2]
				path := filepath.Join(t.TempDir(), "plain.parquet")
				writeFlatParquet(t, path, rows, rgRows, codec, v2, nulls, dict)
				tests := []struct {
					rowGroups []int
					seek      int64
					batchRows int
				}{
					{[]int{0, 1, 2, 3}, 0, 512},
					{[]int{0, 1, 2, 3}, 0, 100_000},
					{[]int{1, 2, 3}, 700, 333},
					{[]int{3}, 1000, 64},
				}
				for _, tt := range tests {
					t.Run(fmt.Sprintf("v2=%v/nulls=%v/dict=%v/%s/window=%d/rg=%v/seek=%d/batch=%d", v2, nulls, dict, codec, feedpq.ChunkWindow, tt.rowGroups, tt.seek, tt.batchRows), func(t *testing.T) {
						got := checkFlatReads(t, path, rgRows, tt.rowGroups, tt.seek, tt.batchRows, nil)
						if got.sawNulls != (nulls && tt.rowGroups[0] < 3) {
							t.Errorf("saw nulls: %v", got.sawNulls)
						}
					})
				}
			}
		}
	}
}

// TestFlatColumnsChosen checks which columns openParquet reads through
// flatColumns: the flat fixed-width ones stored plainly, with nulls or
// without, none when pqarrowOnly is set; and that the batches are the
// same as pqarrow's either way.
func TestFlatColumnsChosen(t *testing.T) {
	for _, nulls := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "plain.parquet")
		writeFlatParquet(t, path, 3000, 1000, compress.Codecs.Snappy, false, nulls, nulls)
		wantPlain := []string{"f32", "f64", "i32", "u64"}
		for _, pqarrowOnly := range []bool{false, true} {
			for _, workers := range []int{1, 2} {
				t.Run(fmt.Sprintf("nulls=%v/pqarrowOnly=%v/workers=%d", nulls, pqarrowOnly, workers), func(t *testing.T) {
					f, err := fsys.Local().Open(context.Background(), path)
					if err != nil {
						t.Fatal(err)
					}
					split := Split{URI: path, Format: FormatParquet, RowGroups: []int{0, 1, 2}, RowOffset: 10, Rows: 2990}
					op, err := openParquet(context.Background(), f, split, ReadOptions{BatchRows: 700, Allocator: memory.DefaultAllocator, DecodeWorkers: workers, pqarrowOnly: pqarrowOnly}, false)
					if err != nil {
						f.Close()
						t.Fatal(err)
					}
					ps := op.src.(*parquetSource)
					defer ps.close()
					want := wantPlain
					if pqarrowOnly {
						want = nil
					}
					if got := flatNames(ps); !slices.Equal(got, want) {
						t.Errorf("flatColumns reads %v, want %v", got, want)
					}
					exp := readPlain(t, path, 10, 2990)
					defer exp.Release()
					off := eachBatch(t, ps.next, func(rec arrow.RecordBatch, off int64) {
						e := exp.NewSlice(off, off+rec.NumRows())
						defer e.Release()
						if !array.RecordEqual(rec, e) {
							t.Fatalf("rows %d+%d differ:\n got %v\nwant %v", off, rec.NumRows(), rec, e)
						}
					})
					if off != 2990 {
						t.Fatalf("read %d rows, want 2990", off)
					}
				})
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFlatColumnsDamaged reads a file whose second row group has a
// damaged page header in column f64: the read fails with ErrInput, naming
// the column and the row group, after the first row group's batches.
func TestFlatColumnsDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "damaged.parquet")
	writeFlatParquet(t, path, 3000, 1000, compress.Codecs.Snappy, false, false, false)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(1).ColumnChunk(1)
	if err != nil {
		t.Fatal(err)
	}
	at := cc.DataPageOffset()
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] = 0 // the header ends before its first field
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	lf, err := fsys.Local().Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	split := Split{URI: path, Format: FormatParquet, RowGroups: []int{0, 1, 2}, Rows: 3000}
	op, err := openParquet(context.Background(), lf, split, ReadOptions{BatchRows: 500, Allocator: memory.DefaultAllocator}, false)
	if err != nil {
		lf.Close()
		t.Fatal(err)
	}
	ps := op.src.(*parquetSource)
	defer ps.close()
	var rows int64
	for {
		rec, err := ps.next(context.Background())
		if err == nil {
			rows += rec.NumRows()
			rec.Release()
			continue
		}
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "column f64, row group 1") {
			t.Fatalf("after %d rows: %v, want ErrInput naming column f64 and row group 1", rows, err)
		}
		break
	}
	if rows != 1000 {
		t.Errorf("%d rows before the error, want the first row group's 1000", rows)
	}
}

// TestFlatColumnsStrings reads a dictionary-encoded string column, with
// nulls, whose row groups each have a dictionary of their own, in
// batches within a row group and spanning several, from the start and
// after a seek, and checks the values against pqarrow's.
func TestFlatColumnsStrings(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}, nil)
	path := filepath.Join(t.TempDir(), "strings.parquet")
	const rows, rgRows = 4000, 900
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rgRows), parquet.WithDataPageSize(1024), parquet.WithDictionaryDefault(true))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := 0; i < rows; i++ {
		rg := i / rgRows
		if i%11 == 3 {
			b.Field(0).AppendNull()
		} else {
			// Each row group has its own values, first seen in its own order.
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("rg%d-v%d", rg, (i*7+rg*13)%(20+rg*5)))
		}
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, tt := range []struct {
		split     Split
		batchRows int
	}{
		{Split{Rows: rows}, 256},
		{Split{Rows: rows}, 2000},
		{Split{RowGroups: []int{1, 2, 3}, RowOffset: 500, Rows: 2200}, 1000},
	} {
		t.Run(fmt.Sprintf("rg=%v/seek=%d/batch=%d", tt.split.RowGroups, tt.split.RowOffset, tt.batchRows), func(t *testing.T) {
			checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer checked.AssertSize(t, 0)
			pool := newBufferPool(checked, 8<<20)
			defer pool.close()
			pool.poison = true
			lf, err := fsys.Local().Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			tt.split.URI, tt.split.Format = path, FormatParquet
			op, err := openParquet(context.Background(), lf, tt.split, ReadOptions{BatchRows: tt.batchRows, Allocator: pool}, false)
			if err != nil {
				lf.Close()
				t.Fatal(err)
			}
			ps := op.src.(*parquetSource)
			defer ps.close()
			if got := flatNames(ps); !slices.Equal(got, []string{"label", "s"}) {
				t.Fatalf("flatColumns reads %v, want [label s]", got)
			}
			first := int64(0)
			if len(tt.split.RowGroups) > 0 {
				first = int64(tt.split.RowGroups[0]) * rgRows
			}
			want := readPlain(t, path, first+tt.split.RowOffset, tt.split.Rows)
			defer want.Release()
			off := eachBatch(t, ps.next, func(rec arrow.RecordBatch, off int64) {
				if rec.Column(0).DataType().ID() != arrow.DICTIONARY {
					t.Fatalf("s read as %s, want a dictionary", rec.Column(0).DataType())
				}
				exp := want.NewSlice(off, off+rec.NumRows())
				defer exp.Release()
				if got := expand(t, rec.Column(0)); !array.Equal(got, exp.Column(0)) {
					t.Fatalf("rows %d+%d of s differ:\n got %v\nwant %v", off, rec.NumRows(), got, exp.Column(0))
				}
			})
			if off != tt.split.Rows {
				t.Fatalf("read %d rows, want %d", off, tt.split.Rows)
			}
		})
	}
}

// readRecorder is a file that notes the largest read made of it.
type readRecorder struct {
	io.ReaderAt
	largest atomic.Int64
}

func (r *readRecorder) ReadAt(p []byte, off int64) (int, error) {
	for {
		l := r.largest.Load()
		if int64(len(p)) <= l || r.largest.CompareAndSwap(l, int64(len(p))) {
			break
		}
	}
	return r.ReaderAt.ReadAt(p, off)
}

// Large uncompressed pages stored plainly have their values read from
// the file straight into the batches' buffers, never into the window;
// those with nulls are read whole. The batches match pqarrow's, with
// both data page versions, from the start and after a seek, in batches
// within a page and across pages and row groups.
func TestFlatColumnsDirect(t *testing.T) {
	const rows, rgRows, pageSize = 200_000, 90_000, 256 << 10
	for _, v2 := range []bool{false, true} {
		for _, nulls := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "direct.parquet")
			writeFlatParquetPages(t, path, rows, rgRows, pageSize, compress.Codecs.Uncompressed, v2, nulls, false)
			for _, tt := range []struct {
				rowGroups []int
				seek      int64
				batchRows int
			}{
				{[]int{0, 1, 2}, 0, 7000},
				{[]int{1, 2}, 50_001, 4096},
				{[]int{0, 1, 2}, 0, 16384},
				{[]int{0, 2}, 3, 200_000},
			} {
				t.Run(fmt.Sprintf("v2=%v/nulls=%v/rg=%v/seek=%d/batch=%d", v2, nulls, tt.rowGroups, tt.seek, tt.batchRows), func(t *testing.T) {
					src := &readRecorder{}
					checkFlatReads(t, path, rgRows, tt.rowGroups, tt.seek, tt.batchRows, func(f io.ReaderAt) io.ReaderAt {
						src.ReaderAt = f
						return src
					})
					// Every page is at least feedpq.DirectPageMin bytes; batches of
					// fewer bytes of a column tell a page's read from theirs.
					if tt.batchRows*8 >= feedpq.DirectPageMin {
						return
					}
					largest := src.largest.Load()
					if !nulls && largest >= feedpq.DirectPageMin {
						t.Errorf("a read of %d bytes: a page was read whole", largest)
					}
					if nulls && largest < feedpq.DirectPageMin {
						t.Errorf("the largest read was %d bytes: the pages with nulls were not read whole", largest)
					}
				})
			}
		}
	}
}

// flatReads is what checkFlatReads saw: how many column batches were
// slices of a page's buffer (pageValues) rather than copies, and whether
// any batch had nulls.
type flatReads struct {
	sliced   int
	sawNulls bool
}

// checkFlatReads reads rowGroups of the file at path (written by
// writeFlatParquetPages with row groups of rgRows) through flatColumns,
// from row seek, batchRows rows a batch, through a pool that poisons
// every buffer, with the file wrapped by wrap (when not nil); it checks
// every batch against pqarrow's reading, before and after the later
// batches are read.
func checkFlatReads(t *testing.T, path string, rgRows int64, rowGroups []int, seek int64, batchRows int, wrap func(io.ReaderAt) io.ReaderAt) (got flatReads) {
	t.Helper()
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer checked.AssertSize(t, 0)
	pool := newBufferPool(checked, 8<<20)
	defer pool.close()
	pool.poison = true
	f, pf := openParquetTest(t, path)
	var want int64
	var exp arrow.RecordBatch
	for _, rg := range rowGroups {
		n := pf.MetaData().RowGroup(rg).NumRows()
		skip := int64(0)
		if exp == nil {
			skip = seek
		}
		rows := readPlain(t, path, int64(rg)*rgRows+skip, n-skip)
		want += n - skip
		if exp == nil {
			exp = rows
			continue
		}
		joined := concatRecords(t, exp, rows)
		exp.Release()
		rows.Release()
		exp = joined
	}
	defer exp.Release()

	var src io.ReaderAt = f
	if wrap != nil {
		src = wrap(f)
	}
	p := newFlatReader(pf, src, feedpq.ChunkWindow, rowGroups, []int{0, 1, 2, 3}, flatSchema.Fields(), pool, nil, batchRows)
	defer p.Release()
	if err := p.SeekToRow(seek); err != nil {
		t.Fatal(err)
	}
	var off int64
	var kept []arrow.RecordBatch // held to the end: a page's slices outlive its reading
	defer func() {
		for _, rec := range kept {
			rec.Release()
		}
	}()
	for p.Next() {
		rec := p.RecordBatch()
		if n := rec.NumRows(); n != int64(batchRows) && off+n != want {
			t.Fatalf("a batch of %d rows at row %d of %d, want %d", n, off, want, batchRows)
		}
		for c := 0; c < int(rec.NumCols()); c++ {
			e := array.NewSlice(exp.Column(c), off, off+rec.NumRows())
			if !array.Equal(rec.Column(c), e) {
				t.Fatalf("rows %d+%d of column %s differ:\n got %v\nwant %v", off, rec.NumRows(), rec.ColumnName(c), rec.Column(c), e)
			}
			e.Release()
			if rec.Column(c).Data().Buffers()[1].Parent() != nil {
				got.sliced++
			}
			got.sawNulls = got.sawNulls || rec.Column(c).NullN() > 0
		}
		rec.Retain()
		kept = append(kept, rec)
		off += rec.NumRows()
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	if off != want {
		t.Fatalf("read %d rows, want %d", off, want)
	}
	for i, rec := range kept { // the pages' buffers are still what they were
		e := exp.NewSlice(int64(i*batchRows), int64(i*batchRows)+rec.NumRows())
		if !array.RecordEqual(rec, e) {
			t.Fatalf("batch %d changed once later ones were read", i)
		}
		e.Release()
	}
	return got
}

// A batch's values that lie plainly in one decompressed page, none of
// them null, are a slice of the page's buffer, not a copy, when the page
// holds slicedPageBatches batches or more; the batches
// hold the pages they slice after the reader moves on, and match
// pqarrow's, with nulls and without, with both data page versions, in
// batches within a page and across pages and row groups.
func TestFlatColumnsSharePages(t *testing.T) {
	const rows, rgRows, pageSize = 200_000, 90_000, 256 << 10
	for _, v2 := range []bool{false, true} {
		for _, nulls := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "pages.parquet")
			writeFlatParquetPages(t, path, rows, rgRows, pageSize, compress.Codecs.Snappy, v2, nulls, false)
			for _, tt := range []struct {
				rowGroups []int
				seek      int64
				batchRows int
			}{
				{[]int{0, 1, 2}, 0, 4096},
				{[]int{1, 2}, 50_001, 7000},
				{[]int{0, 1, 2}, 0, 20_000}, // pages of fewer than slicedPageBatches batches
				{[]int{0, 2}, 3, 200_000},
			} {
				t.Run(fmt.Sprintf("v2=%v/nulls=%v/rg=%v/seek=%d/batch=%d", v2, nulls, tt.rowGroups, tt.seek, tt.batchRows), func(t *testing.T) {
					got := checkFlatReads(t, path, rgRows, tt.rowGroups, tt.seek, tt.batchRows, nil)
					if small := tt.batchRows < 8192; small != (got.sliced > 0) {
						t.Errorf("%d column batches sliced from pages", got.sliced)
					}
				})
			}
		}
	}
}
