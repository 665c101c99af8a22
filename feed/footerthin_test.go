package feed

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/spindle-ml/spindle/fsys"
)

// footerOf returns the footer of the Parquet file at path.
func footerOf(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	footer, ok := readFooter(f, st.Size())
	if !ok {
		t.Fatalf("readFooter(%s) found no plain footer", path)
	}
	return footer
}

// An indexed footer parses, lean, to the same row groups and column
// chunks without their statistics, and its row groups are where the
// parsed footer has them; thinned, the row groups kept are whole and the
// others have no column chunks.
func TestIndexFooter(t *testing.T) {
	const rows, rgRows = 3000, 300
	path := filepath.Join(t.TempDir(), "mixed.parquet")
	writeMixedParquet(t, path, rows, rgRows)
	footer := footerOf(t, path)
	full, err := metadata.NewFileMetaData(footer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if full.NumRowGroups() != rows/rgRows {
		t.Fatalf("the file has %d row groups, want %d", full.NumRowGroups(), rows/rgRows)
	}
	x, ok := indexFooter(footer)
	if !ok {
		t.Fatal("indexFooter refused the footer")
	}
	if len(x.lean) >= len(footer) {
		t.Errorf("lean footer of %d bytes from %d", len(x.lean), len(footer))
	}
	want, err := unitsOf(full, path)
	if err != nil {
		t.Fatal(err)
	}
	if got := x.units(); !slices.Equal(got, want) {
		t.Errorf("indexed row groups %v, want %v", got, want)
	}
	for _, keep := range [][]int{nil, {0}, {9}, {2, 5, 6}, {7, 3, 7}, {0, 1, 2, 3, 4, 5, 6, 7, 8}, {}} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			thin, ok := x.thin(keep)
			if !ok {
				t.Fatal("thin refused the row groups")
			}
			md, err := metadata.NewFileMetaData(thin, nil)
			if err != nil {
				t.Fatalf("parse the thinned footer: %v", err)
			}
			if md.NumRows != full.NumRows || md.NumRowGroups() != full.NumRowGroups() || !md.Schema.Equals(full.Schema) ||
				!slices.Equal(md.KeyValueMetadata().Keys(), full.KeyValueMetadata().Keys()) || md.GetCreatedBy() != full.GetCreatedBy() {
				t.Fatalf("thinned: %d rows in %d row groups, want %d in %d and the same schema and metadata",
					md.NumRows, md.NumRowGroups(), full.NumRows, full.NumRowGroups())
			}
			for rg := range full.NumRowGroups() {
				a, b := full.RowGroup(rg), md.RowGroup(rg)
				if a.NumRows() != b.NumRows() || a.TotalByteSize() != b.TotalByteSize() {
					t.Errorf("row group %d: %d rows of %d bytes, want %d of %d", rg, b.NumRows(), b.TotalByteSize(), a.NumRows(), a.TotalByteSize())
				}
				if keep != nil && !slices.Contains(keep, rg) {
					if b.NumColumns() != 0 {
						t.Errorf("row group %d, left out, has %d columns", rg, b.NumColumns())
					}
					continue
				}
				if a.NumColumns() != b.NumColumns() {
					t.Fatalf("row group %d, kept, has %d columns, want %d", rg, b.NumColumns(), a.NumColumns())
				}
				for c := range a.NumColumns() {
					ca, _ := a.ColumnChunk(c)
					cb, err := b.ColumnChunk(c)
					if err != nil {
						t.Fatal(err)
					}
					if ca.DataPageOffset() != cb.DataPageOffset() || ca.TotalCompressedSize() != cb.TotalCompressedSize() ||
						ca.HasDictionaryPage() != cb.HasDictionaryPage() || ca.DictionaryPageOffset() != cb.DictionaryPageOffset() ||
						ca.NumValues() != cb.NumValues() || ca.Compression() != cb.Compression() ||
						!slices.Equal(ca.Encodings(), cb.Encodings()) || !slices.Equal(ca.EncodingStats(), cb.EncodingStats()) {
						t.Errorf("row group %d column %d differs when thinned", rg, c)
					}
					if ok, _ := ca.StatsSet(); !ok {
						t.Fatalf("row group %d column %d has no statistics to take out", rg, c)
					}
					if ok, _ := cb.StatsSet(); ok {
						t.Errorf("row group %d column %d kept its statistics", rg, c)
					}
				}
			}
		})
	}
}

// A field header after a field taken out is written anew, as a delta
// when it can be and in full when it cannot.
func TestFieldHeader(t *testing.T) {
	for _, c := range []struct{ id, last int16 }{{13, 11}, {1, 0}, {15, 0}, {16, 0}, {40, 11}, {5, 9}, {300, 2}} {
		b := append(fieldHeader(c.id, c.last, ctI32), 0, ctStop) // the i32 0
		r := compactReader{b: b}
		// The reader starts from the field before: one it has read.
		var id int16
		r.structFields(func(got int16, typ byte) {
			id = got
			r.skip(typ)
		})
		want := c.id - c.last // as read from 0
		if c.id-c.last <= 0 || c.id-c.last > 15 {
			want = c.id
		}
		if r.err != nil || id != want {
			t.Errorf("fieldHeader(%d after %d) read back as field %d (%v), want %d", c.id, c.last, id, r.err, want)
		}
	}
}

// indexFooter refuses what it does not understand, without panicking:
// footers cut short or damaged, and the footers of encrypted files; the
// caller then parses the footer whole. thin refuses row groups the file
// does not have.
func TestIndexFooterRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mixed.parquet")
	writeMixedParquet(t, path, 1000, 250)
	footer := footerOf(t, path)
	x, ok := indexFooter(footer)
	if !ok {
		t.Fatal("refused the footer itself")
	}
	for _, keep := range [][]int{{4}, {-1}, {1, 4}} {
		if _, ok := x.thin(keep); ok {
			t.Errorf("thinned to row groups %v of 4", keep)
		}
	}
	for n := range len(footer) {
		if _, ok := indexFooter(footer[:n]); ok {
			t.Fatalf("indexed the footer's first %d of %d bytes", n, len(footer))
		}
	}
	for i := range footer {
		damaged := slices.Clone(footer)
		damaged[i] ^= 0xa5
		if x, ok := indexFooter(damaged); ok { // must not panic; may succeed
			x.thin([]int{1})
		}
	}
	// FileMetaData field 8 (encryption_algorithm), an empty struct, before
	// the final stop: the columns of such a file may be encrypted.
	encrypted := append(slices.Clone(footer[:len(footer)-1]), ctStruct, 16, ctStop, ctStop)
	if _, err := metadata.NewFileMetaData(encrypted, nil); err != nil {
		t.Fatalf("the footer with an encryption algorithm does not parse: %v", err)
	}
	if _, ok := indexFooter(encrypted); ok {
		t.Error("indexed the footer of an encrypted file")
	}
}

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

// readFooter returns the bytes before the length and the magic, whether
// they fit in its first read of the file's end or not, and refuses a
// file that does not end in a plain footer.
func TestReadFooter(t *testing.T) {
	for _, n := range []int{0, 1, footerTail - 9, footerTail - 8, footerTail - 7, 3 * footerTail} {
		footer := make([]byte, n)
		for i := range footer {
			footer[i] = byte(i * 7)
		}
		file := append(append([]byte("PAR1 data pages"), footer...), byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
		file = append(file, parquetMagic...)
		got, ok := readFooter(bytes.NewReader(file), int64(len(file)))
		if !ok || !bytes.Equal(got, footer) {
			t.Errorf("a footer of %d bytes: read %d bytes (%v)", n, len(got), ok)
		}
		if _, ok := readFooter(bytes.NewReader(file[:len(file)-1]), int64(len(file)-1)); ok {
			t.Errorf("a footer of %d bytes: read a file without its last byte", n)
		}
		long := slices.Clone(file)
		binary.LittleEndian.PutUint32(long[len(long)-8:], uint32(len(file)))
		if _, ok := readFooter(bytes.NewReader(long), int64(len(long))); ok {
			t.Errorf("a footer of %d bytes: read a length past the file's start", n)
		}
	}
}
