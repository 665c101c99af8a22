package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	feedpq "github.com/spindle-ml/spindle/feed/parquet"
	"github.com/spindle-ml/spindle/fsys"
)

func TestReaderColumns(t *testing.T) {
	dir := t.TempDir()
	files := map[Format]string{
		FormatParquet: writeParquet(t, filepath.Join(dir, "a.parquet"), testSchema, 0, 50, 16),
		FormatArrow:   writeArrow(t, filepath.Join(dir, "a.arrow"), 0, 50, 16),
		FormatCSV:     writeText(t, filepath.Join(dir, "a.csv"), csvText(0, 50, true)),
	}
	tests := []struct {
		columns []string
		label   string
		want    string
	}{
		{nil, "", "id,x,name,label"},
		{nil, "id", "x,name,label,id"},
		{[]string{"label", "name", "id"}, "", "label,name,id"},
		{[]string{"id", "label", "x"}, "label", "id,x,label"},
		{[]string{"x"}, "id", "x,id"},
	}
	for format, path := range files {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%v/%s", format, tt.columns, tt.label), func(t *testing.T) {
				ctx := context.Background()
				r, err := OpenSplit(ctx, newResolver(), Split{URI: path, Format: format},
					ReadOptions{Columns: tt.columns, LabelColumn: tt.label, BatchRows: 9})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if got := strings.Join(FieldNames(r.Schema()), ","); got != tt.want {
					t.Fatalf("columns %s, want %s", got, tt.want)
				}
				var rows int64
				for {
					rec, err := r.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if rec.NumRows() > 9 {
						t.Errorf("batch of %d rows, BatchRows is 9", rec.NumRows())
					}
					for c, f := range rec.Schema().Fields() {
						col := rec.Column(c)
						for i := 0; i < col.Len(); i++ {
							id := rows + int64(i)
							var got, want string
							switch f.Name {
							case "id":
								got, want = fmt.Sprint(col.(*array.Int64).Value(i)), fmt.Sprint(id)
							case "label":
								got, want = fmt.Sprint(col.(*array.Int64).Value(i)), fmt.Sprint(id%2)
							case "x":
								got, want = fmt.Sprint(col.(*array.Float64).Value(i)), fmt.Sprint(float64(id)/2)
							case "name":
								got, want = col.(*array.String).Value(i), fmt.Sprintf("row %d", id)
								switch {
								case format != FormatCSV:
								case id%7 == 3:
									want = fmt.Sprintf("row, %d", id)
								case id%7 == 5:
									want = fmt.Sprintf(`row "%d"`, id)
								case id%7 == 6:
									want = fmt.Sprintf("row\n%d", id)
								}
							}
							if got != want {
								t.Fatalf("row %d column %s = %q, want %q", id, f.Name, got, want)
							}
						}
					}
					rows += rec.NumRows()
					rec.Release()
				}
				if rows != 50 {
					t.Errorf("read %d rows, want 50", rows)
				}
			})
		}
	}
}

// TestCSVByteRanges cuts a CSV file into byte ranges at arbitrary places,
// mid-line included: every row belongs to exactly one range.
func TestCSVByteRanges(t *testing.T) {
	dir := t.TempDir()
	const rows = 120
	for _, header := range []bool{true, false} {
		text := csvTextOpts(0, rows, header, false)
		path := writeText(t, filepath.Join(dir, fmt.Sprintf("h%v.csv", header)), text)
		for _, step := range []int{1, 7, 64, 333, len(text)} {
			t.Run(fmt.Sprintf("header=%v/step=%d", header, step), func(t *testing.T) {
				ctx := context.Background()
				res := newResolver()
				col := "id"
				if !header {
					col = "_c0"
				}
				var ids []int64
				for off := 0; off < len(text); off += step {
					r, err := OpenSplit(ctx, res, Split{URI: path, Format: FormatCSV, Offset: int64(off), Length: int64(step)},
						ReadOptions{CSV: CSVOptions{Delimiter: ',', Header: header}, BatchRows: 5})
					if err != nil {
						t.Fatalf("range at %d: %v", off, err)
					}
					ids = append(ids, readAll(t, r, col)...)
				}
				checkAllOnce(t, ids, rows)
			})
		}
	}
}

func TestCSVParser(t *testing.T) {
	tests := []struct {
		name, text string
		want       string // records joined by |, fields by ;
		err        string
	}{
		{"plain", "a,b\n1,2\n", "a;b|1;2", ""},
		{"no final newline", "a,b\n1,2", "a;b|1;2", ""},
		{"crlf", "a,b\r\n1,2\r\n", "a;b|1;2", ""},
		{"blank lines", "\n\na,b\n\r\n\n1,2\n\n", "a;b|1;2", ""},
		{"quotes", `"a,1","b""c"` + "\n" + `"",x` + "\n", `a,1;b"c|;x`, ""},
		{"quoted newline", "\"a\nb\",c\r\nd,e", "a\nb;c|d;e", ""},
		{"quoted crlf end", "\"a\"\r\n\"b\"", "a|b", ""},
		{"empty fields", ",,\n", ";;", ""},
		{"stray quote inside", "a\"b,c\n", "a\"b;c", ""},
		{"unterminated", "a,\"b\nc\n", "", "line 1: quoted field never ends"},
		{"junk after quote", "x\n\"a\"b,c\n", "", "line 2: unexpected 'b' after the closing quote"},
	}
	for _, tt := range tests {
		for _, bufSize := range []int{1, 3, 1 << 20} {
			t.Run(fmt.Sprintf("%s/buf=%d", tt.name, bufSize), func(t *testing.T) {
				r := strings.NewReader(tt.text)
				p := newCSVParser(r, "t.csv", int64(len(tt.text)), 0, 1, ',')
				p.buf = make([]byte, bufSize)
				var recs []string
				for {
					err := p.next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						if tt.err == "" || !strings.Contains(err.Error(), tt.err) {
							t.Fatalf("err = %v, want %q", err, tt.err)
						}
						return
					}
					var fs []string
					for i := 0; i < p.numFields(); i++ {
						fs = append(fs, string(p.field(i)))
					}
					recs = append(recs, strings.Join(fs, ";"))
				}
				if tt.err != "" {
					t.Fatalf("no error, want %q", tt.err)
				}
				if got := strings.Join(recs, "|"); got != tt.want {
					t.Errorf("records %q, want %q", got, tt.want)
				}
			})
		}
	}
}

func TestReaderErrors(t *testing.T) {
	dir := t.TempDir()
	pq := writeParquet(t, filepath.Join(dir, "a.parquet"), testSchema, 0, 30, 10)
	arr := writeArrow(t, filepath.Join(dir, "a.arrow"), 0, 30, 10)
	csvPath := writeText(t, filepath.Join(dir, "a.csv"), "id,x\n1,2\n2,abc\n3,4\n")
	ragged := writeText(t, filepath.Join(dir, "r.csv"), "id,x\n1,2\n2\n")
	intSchema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	f32 := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Float32}}, nil)
	tests := []struct {
		name  string
		split Split
		opts  ReadOptions
		want  []string
	}{
		{"more rows than the file", Split{URI: pq, Format: FormatParquet, RowGroups: []int{2}, Rows: 11}, ReadOptions{},
			[]string{pq, "should hold 11 rows but only 10"}},
		{"no such row group", Split{URI: pq, Format: FormatParquet, RowGroups: []int{3}, Rows: 1}, ReadOptions{},
			[]string{pq, "3 row groups", "row group 3"}},
		{"no such batch", Split{URI: arr, Format: FormatArrow, Batches: []int{5}, Rows: 1}, ReadOptions{},
			[]string{arr, "batch 5"}},
		{"planned schema differs", Split{URI: pq, Format: FormatParquet}, ReadOptions{Columns: []string{"id", "x"}, Schema: f32},
			[]string{pq, `column "x" is float64`, "float32"}},
		{"csv value", Split{URI: csvPath, Format: FormatCSV}, ReadOptions{Schema: intSchema},
			[]string{csvPath + " line 3", `column "x"`, `"abc" is not an int64`}},
		{"csv ragged", Split{URI: ragged, Format: FormatCSV}, ReadOptions{Schema: intSchema},
			[]string{ragged + " line 3: 1 fields, want 2"}},
		{"missing file", Split{URI: filepath.Join(dir, "nope.parquet"), Format: FormatParquet}, ReadOptions{},
			[]string{"nope.parquet", "no such file"}},
		{"unknown column", Split{URI: arr, Format: FormatArrow}, ReadOptions{Columns: []string{"ID"}},
			[]string{arr, `"ID"`, `did you mean "id"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			r, err := OpenSplit(ctx, newResolver(), tt.split, tt.opts)
			if err == nil {
				for {
					var rec arrow.RecordBatch
					if rec, err = r.Next(ctx); err != nil {
						break
					}
					rec.Release()
				}
				r.Close()
			}
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("err = %v, want an error", err)
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// countingFile counts the reads of a file.
type countingFile struct {
	fsys.File
	mu    sync.Mutex
	sizes []int
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(p))
	c.mu.Unlock()
	return c.File.ReadAt(p, off)
}

func (c *countingFile) Read(p []byte) (int, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, -len(p))
	c.mu.Unlock()
	return c.File.Read(p)
}

// TestParquetWholeChunkReads checks that a split's column chunks are each
// fetched with one read, not one read per page: on HDFS every read is a
// round trip to a datanode.
func TestParquetWholeChunkReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pages.parquet")
	out, err := fsys.Local().CreateAtomic(context.Background(), filepath.ToSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	// Small pages: many pages per column chunk.
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(4000), parquet.WithDataPageSize(1024),
		parquet.WithDictionaryDefault(false))
	fw, err := pqarrow.NewFileWriter(testSchema, out, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < 16000; off += 4000 {
		rec := testRecord(testSchema, off, 4000)
		if err := fw.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Commit(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	lf, err := fsys.Local().Open(ctx, filepath.ToSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	// The chunk sizes from the footer, and a check that chunks have many pages.
	pf, err := file.NewParquetReader(lf)
	if err != nil {
		t.Fatal(err)
	}
	chunk := map[int]bool{}
	for _, rg := range []int{1, 2} {
		for _, c := range []int{1, 3} { // x, label
			cc, _ := pf.MetaData().RowGroup(rg).ColumnChunk(c)
			chunk[int(cc.TotalCompressedSize())] = true
			pr, err := pf.RowGroup(rg).GetColumnPageReader(c)
			if err != nil {
				t.Fatal(err)
			}
			pages := 0
			for pr.Next() {
				pages++
			}
			pr.Close()
			if pages < 4 {
				t.Fatalf("row group %d column %d has %d pages; the test wants many", rg, c, pages)
			}
		}
	}
	lf.Seek(0, io.SeekStart)

	// The reads the footer takes: one (readFooter reads the file's last
	// 64 KiB).
	fc := &countingFile{File: lf}
	if _, ok := feedpq.ReadFooter(fc, fc.Size()); !ok {
		t.Fatal("ReadFooter found no footer")
	}
	footerReads := len(fc.sizes)
	if footerReads != 1 {
		t.Errorf("reading the footer took %d reads %v, want 1", footerReads, fc.sizes)
	}

	cf := &countingFile{File: lf}
	op, err := openParquet(ctx, cf, Split{URI: path, Format: FormatParquet, RowGroups: []int{1, 2}, Rows: 8000},
		ReadOptions{Columns: []string{"x"}, LabelColumn: "label", BatchRows: 1000, Allocator: memory.DefaultAllocator}, true)
	if err != nil {
		t.Fatal(err)
	}
	r := &splitReader{uri: path, opened: *op, left: 8000, want: 8000}
	ids := readAll(t, r, "label")
	if len(ids) != 8000 {
		t.Fatalf("read %d rows", len(ids))
	}
	data := cf.sizes[footerReads:]
	if len(data) != 4 {
		t.Fatalf("reading 2 row groups x 2 columns took %d reads %v besides %d for the footer, want 4", len(data), data, footerReads)
	}
	for _, n := range data {
		if !chunk[n] {
			t.Errorf("a read of %d bytes is not a whole column chunk (chunks: %v)", n, chunk)
		}
	}
}
