package feed

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/internal/textdist"
)

// CSVOptions say how CSV inputs are laid out. The zero value means the
// defaults: comma-separated with a header line.
type CSVOptions struct {
	// Delimiter separates fields; it must be a single-byte character other
	// than a quote, CR or LF. Zero picks it by the file name: a tab for
	// .tsv and .tab files, a comma for the rest.
	Delimiter rune `json:"delimiter"`
	// Header says the first line names the columns. Without a header the
	// columns are named _c0, _c1, ... (as Spark names them).
	Header bool `json:"header"`
}

// DefaultCSVOptions returns a header line and the delimiter picked by the
// file name (tab-separated for .tsv, comma-separated otherwise).
func DefaultCSVOptions() CSVOptions { return CSVOptions{Header: true} }

// delimiterFor returns the field delimiter of the CSV file at uri.
func (o CSVOptions) delimiterFor(uri string) byte {
	if o.Delimiter != 0 {
		return byte(o.Delimiter)
	}
	switch strings.ToLower(path.Ext(trimCodec(uri))) {
	case ".tsv", ".tab":
		return '\t'
	}
	return ','
}

// ParseCSVDelimiter reads a delimiter setting: one character, or an
// escape for one that configuration files trim away or cannot hold:
// "\t" or "tab" for a tab, "\u0001"-style escapes, "space".
func ParseCSVDelimiter(s string) (rune, error) {
	switch strings.ToLower(s) {
	case `\t`, "tab", "\t":
		return '\t', nil
	case "space":
		return ' ', nil
	}
	if strings.HasPrefix(s, `\u`) || strings.HasPrefix(s, `\x`) {
		var r rune
		if _, err := fmt.Sscanf(s[2:], "%x", &r); err == nil && r > 0 && r <= 0x7f {
			return r, nil
		}
	}
	rs := []rune(s)
	if len(rs) != 1 {
		return 0, fmt.Errorf("%q must be one character (or \\t, tab, space, \\u0001)", s)
	}
	if _, err := (CSVOptions{Delimiter: rs[0]}).Normalize(); err != nil {
		return 0, err
	}
	return rs[0], nil
}

// Normalize applies the defaults and checks the delimiter.
func (o CSVOptions) Normalize() (CSVOptions, error) {
	if o == (CSVOptions{}) {
		return DefaultCSVOptions(), nil
	}
	if o.Delimiter > 0x7f || o.Delimiter == '"' || o.Delimiter == '\n' || o.Delimiter == '\r' {
		return o, fmt.Errorf("%w: CSV delimiter %q: want a single-byte character other than a quote or a line break", ErrInput, o.Delimiter)
	}
	return o, nil
}

// DefaultBatchRows is the batch size readers use when none is given.
const DefaultBatchRows = 16384

// ReadOptions configure OpenSplit.
type ReadOptions struct {
	// Columns are the columns to read, in order; empty means every column
	// of the file. The label column comes last in any case.
	Columns []string
	// LabelColumn is the label column, appended after the other columns
	// (or moved there when Columns lists it). Empty means none.
	LabelColumn string
	// Schema is the planned schema of the selected columns (JobPlan.Schema).
	// Readers return batches of exactly this schema and fail, naming the
	// file, when a file disagrees with it. For CSV it also fixes the column
	// types, which otherwise are inferred by scanning the whole file. Nil
	// derives the schema from the file.
	Schema *arrow.Schema
	// BatchRows is the most rows per batch the reader returns; a hint that
	// bounds decoding work per call. Zero means DefaultBatchRows.
	BatchRows int
	// CSV describes CSV inputs.
	CSV CSVOptions
	// Allocator allocates the batches' buffers; nil means
	// memory.DefaultAllocator.
	Allocator memory.Allocator
	// DecodeWorkers is how many goroutines decode a Parquet split at
	// once, taking its columns one by one for each batch (the caller's
	// goroutine and DecodeWorkers-1 helpers); zero or one decodes on the
	// caller's goroutine alone. The batches are the same either way.
	DecodeWorkers int
	// Flight says how to reach the Arrow Flight services of Flight splits.
	Flight FlightOptions
	// Float32Features reads float64 columns other than the label as
	// float32, for a consumer that takes float32 (the tensor feed): the
	// batches' schema has float32 for them (FeatureSchema). Parquet
	// columns are converted as they are decoded, while their pages are in
	// cache, rather than later from memory; other inputs' columns as each
	// batch is read.
	Float32Features bool

	// footers keeps Parquet footers from one split of a file to the next;
	// nil parses every split's footer.
	footers *footerCache
	// batchAlloc, when set, allocates the values and validity of the
	// batches feedpq.FlatColumns decodes (PipelineConfig.BatchMemory); nil means
	// Allocator.
	batchAlloc memory.Allocator
	// pqarrowOnly reads every Parquet column through pqarrow, never
	// feedpq.FlatColumns; tests compare the two.
	pqarrowOnly bool
}

// FeatureSchema returns schema with its float64 columns other than the
// label column as float32: the schema of the batches read with
// Float32Features.
func FeatureSchema(schema *arrow.Schema, label string) *arrow.Schema {
	fields := schema.Fields()
	narrowed := false
	for i, f := range fields {
		if f.Type.ID() == arrow.FLOAT64 && f.Name != label {
			fields[i].Type, narrowed = arrow.PrimitiveTypes.Float32, true
		}
	}
	if !narrowed {
		return schema
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// outSchema is the schema of the batches read of a split whose columns
// have schema: narrowed with Float32Features.
func (o ReadOptions) outSchema(schema *arrow.Schema) *arrow.Schema {
	if !o.Float32Features || schema == nil {
		return schema
	}
	return FeatureSchema(schema, o.LabelColumn)
}

func (o ReadOptions) Normalize() (ReadOptions, error) {
	if o.BatchRows <= 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	csv, err := o.CSV.Normalize()
	if err != nil {
		return o, err
	}
	o.CSV = csv
	return o, nil
}

// SelectColumns returns the columns to read from a file whose columns are
// all: columns (or all of them when columns is empty) with the label moved
// last. Errors name the missing column and the file, and suggest close
// names.
func SelectColumns(all, columns []string, label, file string) ([]string, error) {
	have := make(map[string]bool, len(all))
	for _, c := range all {
		have[c] = true
	}
	src := columns
	if len(src) == 0 {
		src = all
	}
	out := make([]string, 0, len(src)+1)
	seen := make(map[string]bool, len(src))
	for _, c := range src {
		if !have[c] {
			return nil, fmt.Errorf("%w: column %q (--columns) is not in %s%s", ErrInput, c, file, suggest(c, all))
		}
		if seen[c] {
			return nil, fmt.Errorf("%w: column %q is listed twice in --columns", ErrInput, c)
		}
		seen[c] = true
		if c != label {
			out = append(out, c)
		}
	}
	if label != "" {
		if !have[label] {
			return nil, fmt.Errorf("%w: label column %q (--label-column) is not in %s%s", ErrInput, label, file, suggest(label, all))
		}
		out = append(out, label)
	}
	return out, nil
}

// suggest returns a hint naming the columns closest to name, or listing
// the columns when none is close.
func suggest(name string, all []string) string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	lname := strings.ToLower(name)
	for _, c := range all {
		d := textdist.Levenshtein(lname, strings.ToLower(c))
		if d <= max(2, len(name)/3) || strings.Contains(strings.ToLower(c), lname) {
			cs = append(cs, cand{c, d})
		}
	}
	if len(cs) > 0 {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
		if len(cs) > 3 {
			cs = cs[:3]
		}
		q := make([]string, len(cs))
		for i, c := range cs {
			q[i] = fmt.Sprintf("%q", c.name)
		}
		return " (did you mean " + strings.Join(q, " or ") + "?)"
	}
	list := all
	more := ""
	if len(list) > 12 {
		list, more = list[:12], fmt.Sprintf(", ... %d more", len(all)-12)
	}
	return fmt.Sprintf(" (it has %s%s)", strings.Join(list, ", "), more)
}

// ProjectSchema returns the schema of the named columns of s, in order,
// without metadata.
func ProjectSchema(s *arrow.Schema, names []string) *arrow.Schema {
	fields := make([]arrow.Field, len(names))
	for i, n := range names {
		f := s.Field(s.FieldIndices(n)[0])
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable}
	}
	return arrow.NewSchema(fields, nil)
}

// SelectSchema returns the schema of the columns read from an input
// whose schema is s (what names it in errors): columns (or all of them
// when columns is empty) with the label moved last, without metadata.
func SelectSchema(s *arrow.Schema, columns []string, label, what string) (*arrow.Schema, error) {
	sel, err := SelectColumns(FieldNames(s), columns, label, what)
	if err != nil {
		return nil, err
	}
	return ProjectSchema(s, sel), nil
}

// FieldNames returns the names of s's fields.
func FieldNames(s *arrow.Schema) []string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return names
}

// checkPlanned checks that file's columns (fileSchema, already projected
// to the selected columns) match the planned schema.
func checkPlanned(planned, fileSchema *arrow.Schema, file string) error {
	if planned.NumFields() != fileSchema.NumFields() {
		return fmt.Errorf("%w: %s: the planned schema has columns %v, the file gives %v",
			ErrInput, file, FieldNames(planned), FieldNames(fileSchema))
	}
	for i, pf := range planned.Fields() {
		ff := fileSchema.Field(i)
		if pf.Name != ff.Name {
			return fmt.Errorf("%w: %s: column %d is %q, the planned schema says %q", ErrInput, file, i, ff.Name, pf.Name)
		}
		if !arrow.TypeEqual(pf.Type, ff.Type) {
			return fmt.Errorf("%w: %s: column %q is %s, the planned schema says %s (did the file change since planning?)",
				ErrInput, file, pf.Name, ff.Type, pf.Type)
		}
	}
	return nil
}
