package feed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/fsys"
)

// PlanRequest says what to plan.
type PlanRequest struct {
	// Inputs are URIs (file://, hdfs://), plain local paths, or globs
	// (path.Match syntax in every path element). A directory stands for
	// the data files directly inside it, and a glob for the data files it
	// matches (and those directly inside the directories it matches):
	// names starting with _ or . are skipped (as Spark does: _SUCCESS,
	// .crc files) and, when Format is empty, so are names whose extension
	// tells no format (a model.json beside the data). A file named
	// explicitly is always read.
	Inputs []string
	// Format is the format of every input; empty infers it per file from
	// the file name's extension.
	Format Format
	// Ranks is the number of ranks to split the rows between.
	Ranks int
	// Columns and LabelColumn select the columns as in ReadOptions.
	Columns     []string
	LabelColumn string
	// CSV describes CSV inputs.
	CSV CSVOptions
}

// PlannedFile describes one input file of a plan.
type PlannedFile struct {
	URI    string `json:"uri"`
	Format Format `json:"format"`
	// Rows is the file's row count.
	Rows int64 `json:"rows"`
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// Units counts the file's row groups, record batches or CSV chunks.
	Units int `json:"units"`
}

// JobPlan is the outcome of planning: what every rank reads.
type JobPlan struct {
	// Schema is the schema of the selected columns, label last, as every
	// reader returns them.
	Schema *arrow.Schema
	// Files are the input files in reading order.
	Files []PlannedFile
	// Ranks holds each rank's splits, in order.
	Ranks [][]Split
	// RowsPerRank is each rank's row count; ranks differ by at most one.
	RowsPerRank []int64
	// TotalRows is the rows of every input together.
	TotalRows int64
}

// Splits group consecutive units of a file up to these sizes, so that a
// shuffled epoch has pieces to permute and a split's bytes sit on few
// HDFS blocks, without paying a file open per tiny row group.
const (
	splitMaxRows  = 1 << 20
	splitMaxBytes = 128 << 20
)

// planParallelism bounds the files inspected at once.
const planParallelism = 4

// unit is the smallest piece of a file a split is made of: a Parquet row
// group, an Arrow IPC record batch, or a chunk of CSV lines.
type unit struct {
	index  int   // row group or record batch index; CSV chunk number
	rows   int64 // rows in the unit
	off    int64 // byte range of the unit in the file
	length int64
	line   int64 // CSV: the line number at off
}

// listedFile is an input file found while listing the inputs.
type listedFile struct {
	uri  string
	fs   fsys.FS
	name string
	size int64
}

// fileInfo is what planning learned about one input file.
type fileInfo struct {
	listedFile
	format Format
	schema *arrow.Schema // every column of the file; nil for an empty CSV file
	units  []unit
	rows   int64
}

// Plan lists the inputs, reads their footers (CSV files are scanned
// whole, counting rows exactly and inferring column types: integers become
// int64, other numbers float64, anything else utf8, widened across
// files), checks that every file holds the selected columns with the same
// types, and deals the rows to req.Ranks ranks in file order so that
// ranks differ by at most one row. Every error about the input wraps
// ErrInput and names the input, file or column at fault.
func Plan(ctx context.Context, res *fsys.Resolver, req PlanRequest) (*JobPlan, error) {
	if req.Ranks <= 0 {
		return nil, fmt.Errorf("%w: %d ranks: need at least one", ErrInput, req.Ranks)
	}
	if len(req.Inputs) == 0 {
		return nil, fmt.Errorf("%w: no inputs", ErrInput)
	}
	if req.Format != "" {
		f, err := ParseFormat(string(req.Format))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		req.Format = f
	}
	csvOpts, err := req.CSV.normalize()
	if err != nil {
		return nil, err
	}
	listed, perInput, err := listInputs(ctx, res, req.Inputs, req.Format)
	if err != nil {
		return nil, err
	}

	infos := make([]*fileInfo, len(listed))
	errs := make([]error, len(listed))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(planParallelism)
	for i := range listed {
		g.Go(func() error {
			infos[i], errs[i] = inspectFile(gctx, listed[i], req.Format, csvOpts)
			return errs[i]
		})
	}
	if err := g.Wait(); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		// Name the first bad file in input order; the error of a file
		// inspected after it may be just the cancellation it caused.
		for _, e := range errs {
			if e != nil && !errors.Is(e, context.Canceled) {
				return nil, e
			}
		}
		return nil, err
	}

	schema, err := planSchema(infos, req.Columns, req.LabelColumn)
	if err != nil {
		return nil, err
	}

	rowsOf := make(map[string]int64, len(infos))
	plan := &JobPlan{Schema: schema}
	for _, fi := range infos {
		rowsOf[fi.uri] = fi.rows
		plan.TotalRows += fi.rows
		plan.Files = append(plan.Files, PlannedFile{URI: fi.uri, Format: fi.format, Rows: fi.rows, Bytes: fi.size, Units: len(fi.units)})
	}
	for i, uris := range perInput {
		var rows int64
		for _, u := range uris {
			rows += rowsOf[u]
		}
		if rows == 0 {
			return nil, fmt.Errorf("%w: input %s has no rows", ErrInput, req.Inputs[i])
		}
	}
	if plan.TotalRows < int64(req.Ranks) {
		return nil, fmt.Errorf("%w: the inputs hold %d rows, fewer than the %d ranks (every rank needs at least one row)",
			ErrInput, plan.TotalRows, req.Ranks)
	}
	plan.Ranks, plan.RowsPerRank, err = deal(ctx, infos, req.Ranks)
	if err != nil {
		return nil, err
	}
	return plan, nil
}

// listInputs expands the inputs into files, in input order, each file
// once. perInput lists the URIs each input matched. Directories and globs
// stand for the data files they hold: names starting with _ or . are
// skipped, and so, when format is empty, are names that tell no format
// (a model.json or README beside the data).
func listInputs(ctx context.Context, res *fsys.Resolver, inputs []string, format Format) ([]listedFile, [][]string, error) {
	isData := func(name string) bool {
		if hidden(path.Base(name)) {
			return false
		}
		_, ok := FormatFromPath(name)
		return ok || format != ""
	}
	var out []listedFile
	seen := map[string]bool{}
	perInput := make([][]string, len(inputs))
	for i, in := range inputs {
		if strings.TrimSpace(in) == "" {
			return nil, nil, fmt.Errorf("%w: input %d is empty", ErrInput, i+1)
		}
		fsy, name, err := res.Resolve(ctx, in)
		if err != nil {
			if strings.Contains(err.Error(), in) {
				return nil, nil, fmt.Errorf("%w: %w", ErrInput, err)
			}
			return nil, nil, fmt.Errorf("%w: input %s: %w", ErrInput, in, err)
		}
		var files []listedFile
		if strings.ContainsAny(name, `*?[\`) {
			matches, err := fsy.Glob(ctx, name)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: input %s: %w", ErrInput, in, err)
			}
			last := path.Base(name)
			hiddenOK := strings.HasPrefix(last, ".") || strings.HasPrefix(last, "_")
			for _, m := range matches {
				if hidden(path.Base(m)) && !hiddenOK {
					continue
				}
				fi, err := fsy.Stat(ctx, m)
				if err != nil {
					return nil, nil, fmt.Errorf("%w: input %s: %w", ErrInput, in, err)
				}
				if fi.IsDir() {
					fs, err := listDir(ctx, fsy, in, m, isData)
					if err != nil {
						return nil, nil, err
					}
					files = append(files, fs...)
					continue
				}
				if _, ok := FormatFromPath(m); !ok && format == "" {
					continue // not data, beside the data
				}
				files = append(files, listedFile{uri: fsys.JoinURI(in, m), fs: fsy, name: m, size: fi.Size()})
			}
			if len(matches) == 0 {
				return nil, nil, fmt.Errorf("%w: input %s: no file matches the pattern", ErrInput, in)
			}
			if len(files) == 0 {
				return nil, nil, fmt.Errorf("%w: input %s: the pattern matches no data files (names ending .parquet, .arrow or .csv; "+
					"names starting with _ or . are skipped)", ErrInput, in)
			}
		} else {
			fi, err := fsy.Stat(ctx, name)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("%w: input %s: no such file or directory", ErrInput, in)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%w: input %s: %w", ErrInput, in, err)
			}
			if fi.IsDir() {
				if files, err = listDir(ctx, fsy, in, name, isData); err != nil {
					return nil, nil, err
				}
				if len(files) == 0 {
					return nil, nil, fmt.Errorf("%w: input %s: the directory holds no data files (names ending .parquet, .arrow or .csv; "+
						"names starting with _ or . are skipped)", ErrInput, in)
				}
			} else {
				files = []listedFile{{uri: fsys.JoinURI(in, name), fs: fsy, name: name, size: fi.Size()}}
			}
		}
		for _, f := range files {
			perInput[i] = append(perInput[i], f.uri)
			if !seen[f.uri] {
				seen[f.uri] = true
				out = append(out, f)
			}
		}
	}
	return out, perInput, nil
}

// listDir lists the data files directly inside dir.
func listDir(ctx context.Context, fsy fsys.FS, input, dir string, isData func(string) bool) ([]listedFile, error) {
	entries, err := fsy.ReadDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: input %s: list %s: %w", ErrInput, input, dir, err)
	}
	var out []listedFile
	for _, e := range entries {
		if e.IsDir() || !isData(e.Name()) {
			continue
		}
		name := path.Join(dir, e.Name())
		out = append(out, listedFile{uri: fsys.JoinURI(input, name), fs: fsy, name: name, size: e.Size()})
	}
	return out, nil
}

// hidden reports whether a file name is one Hadoop tools treat as not
// data (_SUCCESS, _metadata, .part-0.crc).
func hidden(name string) bool { return strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") }

// inspectFile reads what planning needs from one file.
func inspectFile(ctx context.Context, lf listedFile, format Format, csvOpts CSVOptions) (*fileInfo, error) {
	if format == "" {
		var ok bool
		if format, ok = FormatFromPath(lf.name); !ok {
			return nil, fmt.Errorf("%w: %s: cannot tell the format from the file name (name it .parquet, .arrow or .csv, or give --input-format)",
				ErrInput, lf.uri)
		}
	}
	f, err := lf.fs.Open(ctx, lf.name)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrInput, lf.uri, err)
	}
	defer f.Close()
	info := &fileInfo{listedFile: lf, format: format}
	info.size = f.Size()
	switch format {
	case FormatParquet:
		info.schema, info.units, err = inspectParquet(f, lf.uri)
	case FormatArrow:
		info.schema, info.units, err = inspectIPC(f, lf.uri)
	case FormatCSV:
		var l *csvLayout
		if l, err = scanCSV(ctx, f, lf.uri, csvOpts, csvChunkBytes); err == nil {
			info.schema, info.units = l.schema(), l.units
		}
	default:
		err = fmt.Errorf("%w: %s: unknown format %q", ErrInput, lf.uri, format)
	}
	if err != nil {
		return nil, err
	}
	for _, u := range info.units {
		info.rows += u.rows
	}
	return info, nil
}

// planSchema checks that every file holds the selected columns with the
// same types and returns their schema, label last. CSV column types are
// widened across CSV files first (int64 < float64 < utf8); a column is
// nullable when it is in any file.
func planSchema(infos []*fileInfo, columns []string, label string) (*arrow.Schema, error) {
	projs := make([]*arrow.Schema, len(infos))
	for i, fi := range infos {
		if fi.schema == nil {
			continue // an empty CSV file has no columns to check
		}
		sel, err := selectColumns(fieldNames(fi.schema), columns, label, fi.uri)
		if err != nil {
			return nil, err
		}
		projs[i] = projectSchema(fi.schema, sel)
	}
	// Widen CSV types across CSV files with the same columns.
	var csvRef *arrow.Schema
	for i, fi := range infos {
		if fi.format != FormatCSV || projs[i] == nil {
			continue
		}
		if csvRef == nil || !sameNames(csvRef, projs[i]) {
			if csvRef == nil {
				csvRef = projs[i]
			}
			continue
		}
		fields := csvRef.Fields()
		for j, f := range projs[i].Fields() {
			fields[j].Type = csvKindOf(fields[j].Type).widen(csvKindOf(f.Type)).arrowType()
		}
		csvRef = arrow.NewSchema(fields, nil)
	}
	for i, fi := range infos {
		if fi.format == FormatCSV && projs[i] != nil && sameNames(csvRef, projs[i]) {
			projs[i] = csvRef
		}
	}

	var ref *arrow.Schema
	var refURI string
	var fields []arrow.Field
	for i, p := range projs {
		if p == nil {
			continue
		}
		if ref == nil {
			ref, refURI, fields = p, infos[i].uri, p.Fields()
			continue
		}
		if err := compareSchemas(ref, refURI, p, infos[i].uri); err != nil {
			return nil, err
		}
		for j, f := range p.Fields() {
			fields[j].Nullable = fields[j].Nullable || f.Nullable
		}
	}
	if ref == nil {
		return nil, fmt.Errorf("%w: no input file has any columns (every file is empty)", ErrInput)
	}
	return arrow.NewSchema(fields, nil), nil
}

func sameNames(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.Fields() {
		if a.Field(i).Name != b.Field(i).Name {
			return false
		}
	}
	return true
}

func csvKindOf(t arrow.DataType) csvKind {
	switch t.ID() {
	case arrow.INT64:
		return kindInt
	case arrow.FLOAT64:
		return kindFloat
	}
	return kindString
}

// compareSchemas reports the first difference between two files' selected
// columns, naming both files and the column.
func compareSchemas(a *arrow.Schema, aURI string, b *arrow.Schema, bURI string) error {
	for i := 0; i < max(a.NumFields(), b.NumFields()); i++ {
		switch {
		case i >= a.NumFields():
			return fmt.Errorf("%w: schemas differ: %s has column %q (%s) that %s lacks", ErrInput, bURI, b.Field(i).Name, b.Field(i).Type, aURI)
		case i >= b.NumFields():
			return fmt.Errorf("%w: schemas differ: %s has column %q (%s) that %s lacks", ErrInput, aURI, a.Field(i).Name, a.Field(i).Type, bURI)
		}
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name {
			switch {
			case !b.HasField(fa.Name):
				return fmt.Errorf("%w: schemas differ: %s has column %q (%s) that %s lacks", ErrInput, aURI, fa.Name, fa.Type, bURI)
			case !a.HasField(fb.Name):
				return fmt.Errorf("%w: schemas differ: %s has column %q (%s) that %s lacks", ErrInput, bURI, fb.Name, fb.Type, aURI)
			}
			return fmt.Errorf("%w: schemas differ: column %d is %q in %s but %q in %s (same columns, different order)",
				ErrInput, i, fa.Name, aURI, fb.Name, bURI)
		}
		if !arrow.TypeEqual(fa.Type, fb.Type) {
			return fmt.Errorf("%w: schemas differ: column %q is %s in %s but %s in %s", ErrInput, fa.Name, fa.Type, aURI, fb.Type, bURI)
		}
	}
	return nil
}

// deal gives every rank a contiguous run of rows in file order, the first
// total%ranks ranks one row more than the others, and cuts each rank's run
// into splits of whole units, the first skipping RowOffset rows of its
// first unit and the last ending inside its last unit where the run does.
func deal(ctx context.Context, files []*fileInfo, ranks int) ([][]Split, []int64, error) {
	var total int64
	for _, f := range files {
		total += f.rows
	}
	base, extra := total/int64(ranks), total%int64(ranks)
	out := make([][]Split, ranks)
	rowsPer := make([]int64, ranks)

	fi, ui := 0, 0 // the current file and unit
	var used int64 // rows of the current unit dealt already
	var cur *Split // the split being built
	var curFile *fileInfo
	var curUnits []unit
	var curBytes int64
	flush := func(r int) error {
		if cur == nil {
			return nil
		}
		if err := finishSplit(ctx, cur, curFile, curUnits); err != nil {
			return err
		}
		out[r] = append(out[r], *cur)
		cur, curFile, curUnits, curBytes = nil, nil, nil, 0
		return nil
	}
	for r := 0; r < ranks; r++ {
		need := base
		if int64(r) < extra {
			need++
		}
		rowsPer[r] = need
		for need > 0 {
			f := files[fi]
			if ui >= len(f.units) {
				fi, ui, used = fi+1, 0, 0
				continue
			}
			u := f.units[ui]
			if used >= u.rows {
				ui, used = ui+1, 0
				continue
			}
			take := min(need, u.rows-used)
			extend := cur != nil && curFile == f && used == 0 &&
				curUnits[len(curUnits)-1].index+1 == u.index &&
				cur.Rows+take <= splitMaxRows && curBytes+u.length <= splitMaxBytes
			if !extend {
				if err := flush(r); err != nil {
					return nil, nil, err
				}
				cur = &Split{URI: f.uri, Format: f.format, RowOffset: used}
				curFile = f
			}
			curUnits = append(curUnits, u)
			curBytes += u.length
			cur.Rows += take
			used += take
			need -= take
		}
		if err := flush(r); err != nil {
			return nil, nil, err
		}
	}
	return out, rowsPer, nil
}

// finishSplit fills in a split's units, byte range and hosts.
func finishSplit(ctx context.Context, s *Split, f *fileInfo, units []unit) error {
	lo, hi := units[0].off, units[0].off+units[0].length
	for _, u := range units {
		switch f.format {
		case FormatParquet:
			s.RowGroups = append(s.RowGroups, u.index)
		case FormatArrow:
			s.Batches = append(s.Batches, u.index)
		}
		lo, hi = min(lo, u.off), max(hi, u.off+u.length)
	}
	if f.format == FormatCSV {
		s.Offset, s.Length, s.Line = lo, hi-lo, units[0].line
	}
	hosts, err := f.fs.Locations(ctx, f.name, lo, hi-lo)
	if err != nil {
		return fmt.Errorf("find the hosts holding %s: %w", f.uri, err)
	}
	s.Hosts = hosts
	return nil
}
