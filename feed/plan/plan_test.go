package plan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"

	"github.com/spindle-ml/spindle/feed/internal/feedtest"

	"github.com/spindle-ml/spindle/fsys"
)

func TestPlanBalance(t *testing.T) {
	type file struct {
		format       feed.Format
		rows, unitRo int64
	}
	tests := []struct {
		name  string
		files []file
		ranks int
	}{
		{"parquet even", []file{{feed.FormatParquet, 1000, 100}, {feed.FormatParquet, 1000, 100}}, 4},
		{"parquet uneven", []file{{feed.FormatParquet, 997, 64}, {feed.FormatParquet, 13, 5}, {feed.FormatParquet, 501, 500}}, 3},
		{"one row group shared by ranks", []file{{feed.FormatParquet, 10, 10}}, 3},
		{"one row group per rank and then some", []file{{feed.FormatParquet, 7, 7}, {feed.FormatParquet, 9, 9}}, 5},
		{"arrow", []file{{feed.FormatArrow, 1000, 64}, {feed.FormatArrow, 333, 100}}, 4},
		{"one record batch shared", []file{{feed.FormatArrow, 11, 11}}, 4},
		{"csv", []file{{feed.FormatCSV, 300, 0}, {feed.FormatCSV, 77, 0}}, 4},
		{"csv one rank", []file{{feed.FormatCSV, 50, 0}}, 1},
		{"mixed formats", []file{{feed.FormatParquet, 100, 30}, {feed.FormatArrow, 100, 30}}, 3},
		{"as many ranks as rows", []file{{feed.FormatParquet, 6, 4}}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var inputs []string
			var start int64
			mixed := false
			for _, f := range tt.files {
				mixed = mixed || f.format != tt.files[0].format
			}
			for i, f := range tt.files {
				p := filepath.Join(dir, fmt.Sprintf("part-%d.%s", i, f.format))
				switch f.format {
				case feed.FormatParquet:
					feedtest.WriteParquet(t, p, feedtest.Schema, start, f.rows, f.unitRo)
				case feed.FormatArrow:
					feedtest.WriteArrow(t, p, start, f.rows, f.unitRo)
				case feed.FormatCSV:
					feedtest.WriteText(t, p, feedtest.CSVText(start, f.rows, true))
				}
				start += f.rows
				inputs = append(inputs, p)
			}
			if !mixed {
				inputs = []string{filepath.Join(dir, "*")}
			}
			res := fsys.NewResolver(fsys.Options{})
			ctx := context.Background()
			plan, err := Plan(ctx, res, feed.PlanRequest{Inputs: inputs, Ranks: tt.ranks, LabelColumn: "label", CSVChunkBytes: 256})
			if err != nil {
				t.Fatal(err)
			}
			if plan.TotalRows != start {
				t.Errorf("TotalRows = %d, want %d", plan.TotalRows, start)
			}
			if len(plan.Files) != len(tt.files) {
				t.Errorf("planned %d files, want %d", len(plan.Files), len(tt.files))
			}
			lo, hi := plan.RowsPerRank[0], plan.RowsPerRank[0]
			var sum int64
			for r, rows := range plan.RowsPerRank {
				lo, hi = min(lo, rows), max(hi, rows)
				sum += rows
				var splitRows int64
				for _, s := range plan.Ranks[r] {
					splitRows += s.Rows
				}
				if splitRows != rows {
					t.Errorf("rank %d: splits hold %d rows, RowsPerRank says %d", r, splitRows, rows)
				}
			}
			if hi-lo > 1 || sum != start {
				t.Errorf("RowsPerRank = %v: want a sum of %d differing by at most one", plan.RowsPerRank, start)
			}
			wantCols := []string{"id", "x", "name", "label"}
			if got := feed.FieldNames(plan.Schema); strings.Join(got, ",") != strings.Join(wantCols, ",") {
				t.Errorf("schema columns %v, want %v", got, wantCols)
			}
			var ids []int64
			for r, splits := range plan.Ranks {
				for _, s := range splits {
					rd, err := feed.OpenSplit(ctx, res, s, feed.ReadOptions{Schema: plan.Schema, LabelColumn: "label", BatchRows: 7})
					if err != nil {
						t.Fatalf("rank %d split %+v: %v", r, s, err)
					}
					got := feedtest.ReadAll(t, rd, "id")
					if int64(len(got)) != s.Rows {
						t.Errorf("rank %d split %+v: read %d rows", r, s, len(got))
					}
					ids = append(ids, got...)
				}
			}
			feedtest.CheckAllOnce(t, ids, start)
		})
	}
}

func TestPlanSharedRowGroupSplits(t *testing.T) {
	dir := t.TempDir()
	p := feedtest.WriteParquet(t, filepath.Join(dir, "one.parquet"), feedtest.Schema, 0, 10, 10)
	plan, err := Plan(context.Background(), fsys.NewResolver(fsys.Options{}), feed.PlanRequest{Inputs: []string{p}, Ranks: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []feed.Split{
		{RowGroups: []int{0}, RowOffset: 0, Rows: 4},
		{RowGroups: []int{0}, RowOffset: 4, Rows: 3},
		{RowGroups: []int{0}, RowOffset: 7, Rows: 3},
	}
	for r, w := range want {
		if len(plan.Ranks[r]) != 1 {
			t.Fatalf("rank %d has %d splits, want 1", r, len(plan.Ranks[r]))
		}
		s := plan.Ranks[r][0]
		if s.URI != feedtest.FileURI(p) || s.Format != feed.FormatParquet || fmt.Sprint(s.RowGroups) != fmt.Sprint(w.RowGroups) ||
			s.RowOffset != w.RowOffset || s.Rows != w.Rows {
			t.Errorf("rank %d split = %+v, want row groups %v, row offset %d, rows %d", r, s, w.RowGroups, w.RowOffset, w.Rows)
		}
	}
}

func TestPlanDirectoriesAndGlobs(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "out")
	if err := os.MkdirAll(filepath.Join(sub, "nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	feedtest.WriteParquet(t, filepath.Join(sub, "part-0.parquet"), feedtest.Schema, 0, 10, 5)
	feedtest.WriteParquet(t, filepath.Join(sub, "part-1.parquet"), feedtest.Schema, 10, 10, 5)
	feedtest.WriteParquet(t, filepath.Join(sub, "nested", "part-9.parquet"), feedtest.Schema, 100, 10, 5)
	feedtest.WriteText(t, filepath.Join(sub, "_SUCCESS"), "")
	feedtest.WriteText(t, filepath.Join(sub, "model.json"), "{}")
	feedtest.WriteText(t, filepath.Join(sub, ".part-0.parquet.crc"), "junk")
	tests := []struct {
		name   string
		inputs []string
		files  int
	}{
		{"directory, searched recursively", []string{sub}, 3},
		{"glob, listing the directories it matches", []string{filepath.Join(sub, "*")}, 3},
		{"glob of directories", []string{filepath.Join(dir, "o*")}, 3},
		{"file uri", []string{"file://" + filepath.ToSlash(filepath.Join(sub, "part-1.parquet"))}, 1},
		{"same file twice", []string{sub, filepath.Join(sub, "part-0.parquet")}, 3},
		{"brace alternatives", []string{filepath.Join(sub, "part-{0,1}.parquet")}, 2},
		{"nested braces across elements", []string{filepath.Join(dir, "{out/part-{1,7},out/nested/part-9}.parquet")}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Plan(context.Background(), fsys.NewResolver(fsys.Options{}), feed.PlanRequest{Inputs: tt.inputs, Ranks: 2})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Files) != tt.files {
				t.Errorf("planned %v, want %d files", plan.Files, tt.files)
			}
			for _, f := range plan.Files {
				if !strings.HasPrefix(f.URI, "file:///") || hidden(filepath.Base(f.URI)) {
					t.Errorf("planned file %s", f.URI)
				}
			}
		})
	}
}

// Hive-style partition directories are searched; hidden directories
// (_temporary, .staging) are not.
func TestPlanPartitionDirectories(t *testing.T) {
	dir := t.TempDir()
	for i, d := range []string{"dt=2026-11-01", "dt=2026-11-02", "dt=2026-11-02/hour=3", "_temporary/0", ".staging"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		feedtest.WriteParquet(t, filepath.Join(dir, d, "part-00000.parquet"), feedtest.Schema, int64(i*10), 10, 5)
	}
	plan, err := Plan(context.Background(), fsys.NewResolver(fsys.Options{}), feed.PlanRequest{Inputs: []string{dir}, Ranks: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range plan.Files {
		rel, _ := filepath.Rel(dir, strings.TrimPrefix(f.URI, "file://"))
		got = append(got, rel)
	}
	want := []string{"dt=2026-11-01/part-00000.parquet", "dt=2026-11-02/part-00000.parquet", "dt=2026-11-02/hour=3/part-00000.parquet"}
	if strings.Join(got, " ") != strings.Join(want, " ") || plan.TotalRows != 30 {
		t.Fatalf("planned %v (%d rows), want %v (30 rows)", got, plan.TotalRows, want)
	}
}

func TestExpandBraces(t *testing.T) {
	for in, want := range map[string]string{
		"part-{0,1}.csv":  "part-0.csv part-1.csv",
		"{a,b{c,d}}/x":    "a/x bc/x bd/x",
		"a/{b/c,d}/*.csv": "a/b/c/*.csv a/d/*.csv",
		"plain/*.parquet": "plain/*.parquet",
		`lit\{a,b}`:       `lit\{a,b}`,
		"{x,y}-{1,2}":     "x-1 x-2 y-1 y-2",
	} {
		got, err := expandBraces(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("expandBraces(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := expandBraces("part-{0,1.csv"); err == nil {
		t.Error("an unmatched { was accepted")
	}
}

func TestPlanColumns(t *testing.T) {
	dir := t.TempDir()
	p := feedtest.WriteParquet(t, filepath.Join(dir, "a.parquet"), feedtest.Schema, 0, 10, 5)
	tests := []struct {
		columns []string
		label   string
		want    string
	}{
		{nil, "", "id,x,name,label"},
		{nil, "label", "id,x,name,label"},
		{nil, "id", "x,name,label,id"},
		{[]string{"x", "id"}, "", "x,id"},
		{[]string{"x"}, "label", "x,label"},
		{[]string{"label", "x"}, "label", "x,label"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%s", tt.columns, tt.label), func(t *testing.T) {
			ctx := context.Background()
			res := fsys.NewResolver(fsys.Options{})
			plan, err := Plan(ctx, res, feed.PlanRequest{Inputs: []string{p}, Ranks: 1, Columns: tt.columns, LabelColumn: tt.label})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(feed.FieldNames(plan.Schema), ","); got != tt.want {
				t.Errorf("schema columns %s, want %s", got, tt.want)
			}
			// Readers without the planned schema agree.
			rd, err := feed.OpenSplit(ctx, res, plan.Ranks[0][0], feed.ReadOptions{Columns: tt.columns, LabelColumn: tt.label})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			if got := strings.Join(feed.FieldNames(rd.Schema()), ","); got != tt.want {
				t.Errorf("reader columns %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPlanCSVTypes(t *testing.T) {
	dir := t.TempDir()
	// x holds only whole numbers in a.csv (int64) and halves in b.csv
	// (float64): the plan widens it to float64 for both.
	feedtest.WriteText(t, filepath.Join(dir, "a.csv"), "id,x,s\n1,2,a\n2,,b\n")
	feedtest.WriteText(t, filepath.Join(dir, "b.csv"), "id,x,s\n3,2.5,7\n4,1e3,x y\n")
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	plan, err := Plan(ctx, res, feed.PlanRequest{Inputs: []string{filepath.Join(dir, "*.csv")}, Ranks: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.BinaryTypes.String}
	for i, f := range plan.Schema.Fields() {
		if !arrow.TypeEqual(f.Type, want[i]) {
			t.Errorf("column %s: %s, want %s", f.Name, f.Type, want[i])
		}
	}
	var xs []string
	for _, s := range plan.Ranks[0] {
		rd, err := feed.OpenSplit(ctx, res, s, feed.ReadOptions{Schema: plan.Schema})
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := rd.Next(ctx)
			if err != nil {
				break
			}
			xs = append(xs, fmt.Sprint(rec.Column(1)))
			rec.Release()
		}
		rd.Close()
	}
	if got := strings.Join(xs, " "); got != "[2 (null)] [2.5 1000]" {
		t.Errorf("x read as %s", got)
	}
}

func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	good := feedtest.WriteParquet(t, filepath.Join(dir, "good.parquet"), feedtest.Schema, 0, 20, 10)
	f32 := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float32},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	other := feedtest.WriteParquet(t, filepath.Join(dir, "other.parquet"), f32, 0, 20, 10)
	noLabel := arrow.NewSchema(feedtest.Schema.Fields()[:3], nil)
	lacking := feedtest.WriteParquet(t, filepath.Join(dir, "lacking.parquet"), noLabel, 0, 20, 10)
	empty := feedtest.WriteParquet(t, filepath.Join(dir, "empty.parquet"), feedtest.Schema, 0, 0, 10)
	b, _ := os.ReadFile(good)
	truncated := feedtest.WriteText(t, filepath.Join(dir, "truncated.parquet"), string(b[:len(b)/2]))
	notParquet := feedtest.WriteText(t, filepath.Join(dir, "text.parquet"), "id,x\n1,2\n")
	arrowFile := feedtest.WriteArrow(t, filepath.Join(dir, "good.arrow"), 0, 10, 5)
	ab, _ := os.ReadFile(arrowFile)
	truncArrow := feedtest.WriteText(t, filepath.Join(dir, "trunc.arrow"), string(ab[:len(ab)-20]))
	ragged := feedtest.WriteText(t, filepath.Join(dir, "ragged.csv"), "a,b,c,d\n1,2,3,4\n\"x\ny\",2,3,4\n1,2,3\n")
	badQuote := feedtest.WriteText(t, filepath.Join(dir, "quote.csv"), "a,b\n1,\"2\"x\n")
	headerOnly := feedtest.WriteText(t, filepath.Join(dir, "header.csv"), "a,b\n")
	noExt := feedtest.WriteText(t, filepath.Join(dir, "data.bin"), "x")
	hiddenDir := filepath.Join(dir, "hidden")
	os.Mkdir(hiddenDir, 0o755)
	feedtest.WriteText(t, filepath.Join(hiddenDir, "_SUCCESS"), "")

	tests := []struct {
		name string
		req  feed.PlanRequest
		want []string // substrings of the error
	}{
		{"missing file", feed.PlanRequest{Inputs: []string{filepath.Join(dir, "nope.parquet")}}, []string{"input " + filepath.Join(dir, "nope.parquet") + ": no such file"}},
		{"glob matches nothing", feed.PlanRequest{Inputs: []string{filepath.Join(dir, "*.orc")}}, []string{filepath.Join(dir, "*.orc"), "no file matches"}},
		{"truncated parquet", feed.PlanRequest{Inputs: []string{truncated}}, []string{truncated, "not a Parquet file"}},
		{"not parquet", feed.PlanRequest{Inputs: []string{notParquet}}, []string{notParquet, "not a Parquet file"}},
		{"truncated arrow", feed.PlanRequest{Inputs: []string{truncArrow}}, []string{truncArrow, "Arrow IPC"}},
		{"schemas differ", feed.PlanRequest{Inputs: []string{good, other}}, []string{"schemas differ", `"x"`, "float64", "float32", good, other}},
		{"column missing in one file", feed.PlanRequest{Inputs: []string{good, lacking}}, []string{"schemas differ", `"label"`, good, lacking}},
		{"unknown column", feed.PlanRequest{Inputs: []string{good}, Columns: []string{"id", "lable"}}, []string{`column "lable"`, good, `did you mean "label"`}},
		{"unknown label", feed.PlanRequest{Inputs: []string{good}, LabelColumn: "target"}, []string{`label column "target"`, good, "id, x, name, label"}},
		{"label missing in second file", feed.PlanRequest{Inputs: []string{good, lacking}, LabelColumn: "label"}, []string{`label column "label"`, lacking}},
		{"column listed twice", feed.PlanRequest{Inputs: []string{good}, Columns: []string{"x", "x"}}, []string{`column "x" is listed twice`}},
		{"zero ranks", feed.PlanRequest{Inputs: []string{good}, Ranks: -1}, []string{"-1 ranks"}},
		{"zero rows", feed.PlanRequest{Inputs: []string{good, empty}}, []string{"input " + empty + " has no rows"}},
		{"csv header only", feed.PlanRequest{Inputs: []string{headerOnly}}, []string{"input " + headerOnly + " has no rows"}},
		{"fewer rows than ranks", feed.PlanRequest{Inputs: []string{good}, Ranks: 21}, []string{"20 rows", "21 ranks"}},
		{"ragged csv", feed.PlanRequest{Inputs: []string{ragged}}, []string{ragged + " line 5: 3 fields, want 4"}},
		{"bad quote", feed.PlanRequest{Inputs: []string{badQuote}}, []string{badQuote + " line 2", "after the closing quote"}},
		{"unknown extension", feed.PlanRequest{Inputs: []string{noExt}}, []string{noExt, "cannot tell the format"}},
		{"no data files in directory", feed.PlanRequest{Inputs: []string{hiddenDir}}, []string{hiddenDir, "no data files"}},
		{"glob matches no data files", feed.PlanRequest{Inputs: []string{filepath.Join(dir, "*.bin")}}, []string{filepath.Join(dir, "*.bin"), "no data files"}},
		{"bad format", feed.PlanRequest{Inputs: []string{good}, Format: "orc"}, []string{`"orc"`}},
		{"forced format", feed.PlanRequest{Inputs: []string{arrowFile}, Format: feed.FormatParquet}, []string{arrowFile, "not a Parquet file"}},
		{"bad delimiter", feed.PlanRequest{Inputs: []string{ragged}, CSV: feed.CSVOptions{Delimiter: '"', Header: true}}, []string{"delimiter"}},
		{"bad scheme", feed.PlanRequest{Inputs: []string{"s3://bucket/x.parquet"}}, []string{"s3://bucket/x.parquet", "unsupported scheme"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.req.Ranks == 0 {
				tt.req.Ranks = 1
			}
			if tt.req.Ranks < 0 {
				tt.req.Ranks = 0
				tt.want = []string{"0 ranks"}
			}
			_, err := Plan(context.Background(), fsys.NewResolver(fsys.Options{}), tt.req)
			if err == nil {
				t.Fatal("Plan succeeded")
			}
			t.Log(err)
			if !errors.Is(err, feed.ErrInput) {
				t.Errorf("error %q does not wrap ErrInput", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// PlanRequest.CSVChunkBytes spaces the record starts planning remembers
// in a CSV file: a small file is one unit by default, several with a
// small spacing.
func TestPlanCSVChunkBytes(t *testing.T) {
	path := feedtest.WriteText(t, filepath.Join(t.TempDir(), "a.csv"), feedtest.CSVText(0, 300, true))
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	for _, tt := range []struct {
		chunk     int64
		manyUnits bool
	}{{0, false}, {256, true}} {
		jp, err := Plan(context.Background(), res, feed.PlanRequest{Inputs: []string{path}, Ranks: 1, LabelColumn: "label", CSVChunkBytes: tt.chunk})
		if err != nil {
			t.Fatal(err)
		}
		if got := jp.Files[0].Units > 1; got != tt.manyUnits {
			t.Errorf("CSVChunkBytes %d: %d units", tt.chunk, jp.Files[0].Units)
		}
	}
}
