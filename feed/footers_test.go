package feed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/fsys"
)

// A pipeline whose splits name only some of a file's row groups parses
// the file's footer once, thinned to them, and feeds their rows.
func TestFooterThinnedToTheRank(t *testing.T) {
	const rows, rgRows = 6000, 1000
	path := filepath.Join(t.TempDir(), "mixed.parquet")
	writeMixedParquet(t, path, rows, rgRows)
	splits := []Split{
		{URI: path, Format: FormatParquet, RowGroups: []int{4, 5}, Rows: 2 * rgRows},
		{URI: path, Format: FormatParquet, RowGroups: []int{1}, Rows: rgRows},
	}
	p, err := NewPipeline(newResolver(), PipelineConfig{Splits: splits, Schema: mixedSchema, BatchRows: 700,
		DecodeWorkers: 2, EvenBatches: EvenOff})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	first := readPlain(t, path, 4*rgRows, 2*rgRows)
	defer first.Release()
	second := readPlain(t, path, rgRows, rgRows)
	defer second.Release()
	want := concatRecords(t, first, second)
	defer want.Release()
	for epoch := range 2 {
		checkEpoch(t, p, epoch, want)
	}
	if m := p.footers.misses.Load(); m != 1 {
		t.Errorf("the footer was parsed %d times, want once", m)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	md := p.footers.get(footerKey{uri: path, size: st.Size()})
	if md == nil {
		t.Fatal("no footer kept")
	}
	for rg := range md.NumRowGroups() {
		got, want := md.RowGroup(rg).NumColumns(), 0
		if rg == 1 || rg == 4 || rg == 5 {
			want = md.Schema.NumColumns()
		}
		if got != want {
			t.Errorf("row group %d has %d columns in the footer kept, want %d", rg, got, want)
		}
	}

	// The remote path, which reads whole chunks through the chunk cache,
	// thins the footer the same way.
	opts := ReadOptions{Schema: mixedSchema, BatchRows: 700, Allocator: memory.DefaultAllocator, footers: newFooterCache(splits)}
	f, err := fsys.Local().Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	op, err := openParquet(context.Background(), f, splits[0], opts, true)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	r := &splitReader{uri: path, opened: *op, left: splits[0].Rows, want: splits[0].Rows}
	n := eachBatch(t, r.Next, func(rec arrow.RecordBatch, off int64) {
		exp := first.NewSlice(off, off+rec.NumRows())
		defer exp.Release()
		if !array.RecordEqual(rec, exp) {
			t.Fatalf("remote: rows %d+%d differ", off, rec.NumRows())
		}
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n != splits[0].Rows {
		t.Errorf("remote: read %d rows, want %d", n, splits[0].Rows)
	}
	if md := opts.footers.get(footerKey{uri: path, size: st.Size()}); md == nil || md.RowGroup(0).NumColumns() != 0 {
		t.Error("remote: the footer kept is not thinned")
	}

	// A split the pipeline was not given is refused, not read from the
	// thinned footer.
	_, err = OpenSplit(context.Background(), newResolver(), Split{URI: path, Format: FormatParquet, RowGroups: []int{2}, Rows: rgRows},
		p.readOptions())
	if err == nil || !strings.Contains(err.Error(), "row group 2 is not among the rank's") {
		t.Errorf("opening a split of row group 2: %v", err)
	}
}

// concatRecords returns the rows of a followed by those of b.
func concatRecords(t *testing.T, a, b arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	cols := make([]arrow.Array, a.NumCols())
	for i := range cols {
		c, err := array.Concatenate([]arrow.Array{a.Column(i), b.Column(i)}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		cols[i] = c
	}
	return array.NewRecordBatch(a.Schema(), cols, a.NumRows()+b.NumRows())
}
