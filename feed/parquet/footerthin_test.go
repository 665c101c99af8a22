package parquet

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/spindle-ml/spindle/feed/parquet/pqtest"
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
	footer, ok := ReadFooter(f, st.Size())
	if !ok {
		t.Fatalf("ReadFooter(%s) found no plain footer", path)
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
	pqtest.WriteFlat(t, path, rows, rgRows, 2048, compress.Codecs.Snappy, false, true, true)
	footer := footerOf(t, path)
	full, err := metadata.NewFileMetaData(footer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if full.NumRowGroups() != rows/rgRows {
		t.Fatalf("the file has %d row groups, want %d", full.NumRowGroups(), rows/rgRows)
	}
	x, ok := IndexFooter(footer)
	if !ok {
		t.Fatal("indexFooter refused the footer")
	}
	if len(x.Lean()) >= len(footer) {
		t.Errorf("lean footer of %d bytes from %d", len(x.Lean()), len(footer))
	}
	want := rowGroupsOf(t, full)
	if got := x.RowGroups(); !slices.Equal(got, want) {
		t.Errorf("indexed row groups %v, want %v", got, want)
	}
	for _, keep := range [][]int{nil, {0}, {9}, {2, 5, 6}, {7, 3, 7}, {0, 1, 2, 3, 4, 5, 6, 7, 8}, {}} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			thin, ok := x.Thin(keep)
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
	pqtest.WriteFlat(t, path, 1000, 250, 2048, compress.Codecs.Snappy, false, true, true)
	footer := footerOf(t, path)
	x, ok := IndexFooter(footer)
	if !ok {
		t.Fatal("refused the footer itself")
	}
	for _, keep := range [][]int{{4}, {-1}, {1, 4}} {
		if _, ok := x.Thin(keep); ok {
			t.Errorf("thinned to row groups %v of 4", keep)
		}
	}
	for n := range len(footer) {
		if _, ok := IndexFooter(footer[:n]); ok {
			t.Fatalf("indexed the footer's first %d of %d bytes", n, len(footer))
		}
	}
	for i := range footer {
		damaged := slices.Clone(footer)
		damaged[i] ^= 0xa5
		if x, ok := IndexFooter(damaged); ok { // must not panic; may succeed
			x.Thin([]int{1})
		}
	}
	// FileMetaData field 8 (encryption_algorithm), an empty struct, before
	// the final stop: the columns of such a file may be encrypted.
	encrypted := append(slices.Clone(footer[:len(footer)-1]), ctStruct, 16, ctStop, ctStop)
	if _, err := metadata.NewFileMetaData(encrypted, nil); err != nil {
		t.Fatalf("the footer with an encryption algorithm does not parse: %v", err)
	}
	if _, ok := IndexFooter(encrypted); ok {
		t.Error("indexed the footer of an encrypted file")
	}
}

// ReadFooter returns the bytes before the length and the magic, whether
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
		got, ok := ReadFooter(bytes.NewReader(file), int64(len(file)))
		if !ok || !bytes.Equal(got, footer) {
			t.Errorf("a footer of %d bytes: read %d bytes (%v)", n, len(got), ok)
		}
		if _, ok := ReadFooter(bytes.NewReader(file[:len(file)-1]), int64(len(file)-1)); ok {
			t.Errorf("a footer of %d bytes: read a file without its last byte", n)
		}
		long := slices.Clone(file)
		binary.LittleEndian.PutUint32(long[len(long)-8:], uint32(len(file)))
		if _, ok := ReadFooter(bytes.NewReader(long), int64(len(long))); ok {
			t.Errorf("a footer of %d bytes: read a length past the file's start", n)
		}
	}
}

// rowGroupsOf returns the row groups of a parsed footer, as RowGroups
// has them.
func rowGroupsOf(t *testing.T, md *metadata.FileMetaData) []RowGroup {
	t.Helper()
	var out []RowGroup
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		span := NewChunkSpan()
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			span.Add(ChunkStart(cc), cc.TotalCompressedSize())
		}
		off, length := span.Bytes()
		out = append(out, RowGroup{Rows: rg.NumRows(), Off: off, Length: length})
	}
	return out
}
