package feed

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// planAndReadIDs plans inputs over ranks and reads every split, returning
// the id column's values.
func planAndReadIDs(t *testing.T, req PlanRequest) (*JobPlan, []int64) {
	t.Helper()
	ctx := context.Background()
	res := newResolver()
	defer res.Close()
	plan, err := Plan(ctx, res, req)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for r, splits := range plan.Ranks {
		for _, s := range splits {
			rd, err := OpenSplit(ctx, res, s, ReadOptions{Schema: plan.Schema, LabelColumn: req.LabelColumn, CSV: req.CSV, BatchRows: 7})
			if err != nil {
				t.Fatalf("rank %d split %+v: %v", r, s, err)
			}
			ids = append(ids, readAll(t, rd, "id")...)
		}
	}
	return plan, ids
}

func compressWith(t *testing.T, ext string, text []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch ext {
	case ".gz":
		// Two members, as Hadoop's concatenated gzip output has.
		half := len(text) / 2
		for _, part := range [][]byte{text[:half], text[half:]} {
			w := gzip.NewWriter(&buf)
			_, _ = w.Write(part)
			_ = w.Close()
		}
	case ".deflate":
		w := zlib.NewWriter(&buf)
		_, _ = w.Write(text)
		_ = w.Close()
	case ".zst":
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(text)
		_ = w.Close()
	case ".bz2":
		if _, err := exec.LookPath("bzip2"); err != nil {
			t.Skip("no bzip2 command to compress with")
		}
		cmd := exec.Command("bzip2", "-c")
		cmd.Stdin, cmd.Stdout = bytes.NewReader(text), &buf
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no compressor for %s", ext)
	}
	return buf.Bytes()
}

// Compressed CSV files are read by their extension, as Hadoop's codecs
// name them, one unit per file (they cannot be cut by byte range), and
// every row arrives once.
func TestCompressedCSV(t *testing.T) {
	withCSVChunk(t, 256)
	for _, ext := range []string{".gz", ".bz2", ".zst", ".deflate"} {
		t.Run(ext, func(t *testing.T) {
			dir := t.TempDir()
			writeText(t, filepath.Join(dir, "a.csv"+ext), string(compressWith(t, ext, []byte(csvText(0, 300, true)))))
			writeText(t, filepath.Join(dir, "b.csv"), csvText(300, 200, true))
			plan, ids := planAndReadIDs(t, PlanRequest{Inputs: []string{dir}, Ranks: 3, LabelColumn: "label"})
			checkAllOnce(t, ids, 500)
			for _, f := range plan.Files {
				if strings.HasSuffix(f.URI, ext) && f.Units != 1 {
					t.Errorf("%s planned as %d units, want 1 (no byte ranges in compressed text)", f.URI, f.Units)
				}
			}
		})
	}
}

func TestCompressedCSVErrors(t *testing.T) {
	dir := t.TempDir()
	gz := compressWith(t, ".gz", []byte(csvText(0, 10, true)))
	tests := []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"hadoop snappy", "a.csv.snappy", []byte("\x00\x00\x00\x10xxxx"), "SnappyCodec"},
		{"hadoop lz4", "a.csv.lz4", []byte("\x00\x00\x00\x10xxxx"), "Lz4Codec"},
		{"gzip under a plain name", "b.csv", gz, "starts like a gzip file"},
		{"not gzip at all", "c.csv.gz", []byte("id,x\n1,2\n"), "not readable as GzipCodec"},
		{"compressed parquet", "d.parquet.gz", gz, "compresses inside the file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeText(t, filepath.Join(dir, tt.file), string(tt.data))
			_, err := Plan(context.Background(), newResolver(), PlanRequest{Inputs: []string{p}, Ranks: 1})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.file) {
				t.Fatalf("err = %v, want an input error naming %s and %q", err, tt.file, tt.want)
			}
		})
	}
}

// A truncated compressed file fails when read, naming the file.
func TestCompressedCSVTruncated(t *testing.T) {
	dir := t.TempDir()
	whole := compressWith(t, ".zst", []byte(csvText(0, 2000, true)))
	p := writeText(t, filepath.Join(dir, "a.csv.zst"), string(whole[:len(whole)*2/3]))
	_, err := Plan(context.Background(), newResolver(), PlanRequest{Inputs: []string{p}, Ranks: 1})
	if err == nil || !strings.Contains(err.Error(), "a.csv.zst") {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}

func tsvText(start, rows int64) string {
	var sb strings.Builder
	sb.WriteString("id\tname, with comma\tlabel\n")
	for i := start; i < start+rows; i++ {
		sb.WriteString(strings.Join([]string{itoa(i), " padded, value ", itoa(i % 2)}, "\t") + "\n")
	}
	return sb.String()
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// Tab-separated files: by the .tsv extension with no delimiter set, or
// by an explicit tab delimiter whatever the name; values keep their
// spaces and commas.
func TestTSV(t *testing.T) {
	dir := t.TempDir()
	writeText(t, filepath.Join(dir, "a.tsv"), tsvText(0, 100))
	writeText(t, filepath.Join(dir, "b.tsv.gz"), string(compressWith(t, ".gz", []byte(tsvText(100, 50)))))
	plan, ids := planAndReadIDs(t, PlanRequest{Inputs: []string{dir}, Ranks: 2, LabelColumn: "label"})
	checkAllOnce(t, ids, 150)
	if got := strings.Join(FieldNames(plan.Schema), "|"); got != "id|name, with comma|label" {
		t.Fatalf("columns %q", got)
	}

	other := t.TempDir()
	writeText(t, filepath.Join(other, "data.txt"), tsvText(0, 40))
	_, ids = planAndReadIDs(t, PlanRequest{Inputs: []string{filepath.Join(other, "data.txt")}, Format: FormatCSV, Ranks: 2,
		LabelColumn: "label", CSV: CSVOptions{Delimiter: '\t', Header: true}})
	checkAllOnce(t, ids, 40)
}

func TestParseCSVDelimiter(t *testing.T) {
	for in, want := range map[string]rune{`\t`: '\t', "tab": '\t', "TAB": '\t', "\t": '\t', ";": ';', "|": '|', `\u0001`: 1, "space": ' '} {
		if got, err := ParseCSVDelimiter(in); err != nil || got != want {
			t.Errorf("ParseCSVDelimiter(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ";;", `"`, "é"} {
		if _, err := ParseCSVDelimiter(bad); err == nil {
			t.Errorf("ParseCSVDelimiter(%q) accepted", bad)
		}
	}
}
