package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// csvChunkBytes is the spacing of the record starts planning remembers in
// a CSV file; a split starts at one of them and skips at most this many
// bytes of rows to reach its first row.
var csvChunkBytes int64 = 1 << 20

// csvLayout is what a scan of a whole CSV file learns.
type csvLayout struct {
	names []string // nil for an empty file
	kinds []csvKind
	rows  int64
	units []unit // consecutive chunks of records, in file order
}

// schema returns the inferred schema of the file's columns.
func (l *csvLayout) schema() *arrow.Schema {
	if l.names == nil {
		return nil
	}
	fields := make([]arrow.Field, len(l.names))
	for i, n := range l.names {
		fields[i] = arrow.Field{Name: n, Type: l.kinds[i].arrowType(), Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// WidenCSVType returns the type of a CSV column that one file infers as a
// and another as b: int64, then float64, then utf8, whichever holds both.
func WidenCSVType(a, b arrow.DataType) arrow.DataType {
	return csvKindOf(a).widen(csvKindOf(b)).arrowType()
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

// arrowType is the Arrow type of a column of kind k.
func (k csvKind) arrowType() arrow.DataType {
	switch k {
	case kindInt:
		return arrow.PrimitiveTypes.Int64
	case kindFloat:
		return arrow.PrimitiveTypes.Float64
	}
	return arrow.BinaryTypes.String
}

// readCSVHeader parses the column names of a CSV file: the header line, or
// _c0, _c1, ... for as many fields as the first record has. It returns a
// nil slice for an empty file, and a parser positioned after the header
// (at the first record when there is no header).
func readCSVHeader(f csvFile, uri string, opts CSVOptions) ([]string, *csvParser, error) {
	p := newCSVParser(f, uri, f.Size(), 0, 1, opts.delimiterFor(uri))
	start := p.offset()
	if err := p.next(); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p, nil
		}
		return nil, nil, err
	}
	names := make([]string, p.numFields())
	if !opts.Header {
		for i := range names {
			names[i] = "_c" + strconv.Itoa(i)
		}
		// Start again at the first record, which is data.
		return names, newCSVParser(f, uri, f.Size(), start, 1, opts.delimiterFor(uri)), nil
	}
	seen := make(map[string]int, len(names))
	for i := range names {
		names[i] = string(p.field(i))
		if names[i] == "" {
			names[i] = "_c" + strconv.Itoa(i)
		}
		if j, dup := seen[names[i]]; dup {
			return nil, nil, fmt.Errorf("%w: %s line %d: the header names column %q twice (fields %d and %d)",
				ErrInput, uri, p.recLine, names[i], j+1, i+1)
		}
		seen[names[i]] = i
	}
	return names, p, nil
}

// scanCSV reads a whole CSV file: its columns, their inferred types, its
// row count, and record starts about every chunk bytes. It rejects ragged
// rows and malformed quoting, naming the line.
func scanCSV(ctx context.Context, f csvFile, uri string, opts CSVOptions, chunk int64) (*csvLayout, error) {
	names, p, err := readCSVHeader(f, uri, opts)
	if err != nil {
		return nil, err
	}
	l := &csvLayout{names: names, kinds: make([]csvKind, len(names))}
	if names == nil {
		return l, nil
	}
	cur := unit{off: -1}
	for {
		if l.rows%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		err := p.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		if p.numFields() != len(names) {
			return nil, fmt.Errorf("%w: %s: %d fields, want %d", ErrInput, p.where(), p.numFields(), len(names))
		}
		if cur.off < 0 {
			cur = unit{off: p.recOff, line: p.recLine}
		} else if p.recOff-cur.off >= chunk {
			cur.length = p.recOff - cur.off
			l.units = append(l.units, cur)
			cur = unit{off: p.recOff, line: p.recLine}
		}
		for i := range l.kinds {
			if l.kinds[i] != kindString {
				l.kinds[i] = l.kinds[i].observe(p.field(i))
			}
		}
		cur.rows++
		l.rows++
	}
	if cur.off >= 0 {
		cur.length = p.offset() - cur.off
		l.units = append(l.units, cur)
	}
	for i := range l.units {
		l.units[i].index = i
	}
	return l, nil
}

// csvColumn builds one output column of a CSV split.
type csvColumn struct {
	name    string
	fileIdx int
	ints    *array.Int64Builder
	floats  *array.Float64Builder
	strs    *array.StringBuilder
	builder array.Builder
}

// csvSource reads the records of one CSV split into batches.
type csvSource struct {
	uri       string
	file      csvFile
	p         *csvParser
	schema    *arrow.Schema
	cols      []csvColumn
	nfields   int
	batchRows int
	// The split ends after left more rows (when left >= 0), else at the
	// first record starting at or after end.
	left int64
	end  int64
	done bool
}

// openCSV opens a CSV split, which owns the lines starting inside
// [Offset, Offset+Length) (the header never), or exactly Rows rows after
// skipping RowOffset when Rows is set.
func openCSV(ctx context.Context, f csvFile, s Split, opts ReadOptions) (*csvSource, error) {
	names, hp, err := readCSVHeader(f, s.URI, opts.CSV)
	if err != nil {
		return nil, err
	}
	if names == nil {
		names = []string{}
	}
	sel, err := SelectColumns(names, opts.Columns, opts.LabelColumn, s.URI)
	if err != nil {
		return nil, err
	}
	schema := opts.Schema
	if schema == nil {
		l, err := scanCSV(ctx, f, s.URI, opts.CSV, csvChunkBytes)
		if err != nil {
			return nil, err
		}
		schema = ProjectSchema(l.schema(), sel)
	} else if err := checkCSVSchema(schema, sel, s.URI); err != nil {
		return nil, err
	}

	// Position the parser at the split's first line.
	var p *csvParser
	switch {
	case s.Offset <= hp.offset():
		p = hp // the header (if any) is behind us
	default:
		p = newCSVParser(f, s.URI, f.Size(), s.Offset, max(s.Line, 0), opts.CSV.delimiterFor(s.URI))
		var prev [1]byte
		if _, err := f.ReadAt(prev[:], s.Offset-1); err != nil {
			return nil, fmt.Errorf("read %s at byte %d: %w", s.URI, s.Offset-1, err)
		}
		if prev[0] != '\n' {
			// Not a line start: the line belongs to the split before.
			p.line = 0
			if err := p.skipPartialLine(); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
		}
	}
	src := &csvSource{uri: s.URI, file: f, p: p, schema: schema, nfields: len(names),
		batchRows: opts.BatchRows, left: -1, end: -1}
	if s.Length > 0 {
		src.end = s.Offset + s.Length
	}
	colIdx := make(map[string]int, len(names))
	for i, n := range names {
		colIdx[n] = i
	}
	for i, fld := range schema.Fields() {
		c := csvColumn{name: fld.Name, fileIdx: colIdx[sel[i]]}
		switch fld.Type.ID() {
		case arrow.INT64:
			c.ints = array.NewInt64Builder(opts.Allocator)
			c.builder = c.ints
		case arrow.FLOAT64:
			c.floats = array.NewFloat64Builder(opts.Allocator)
			c.builder = c.floats
		default:
			c.strs = array.NewStringBuilder(opts.Allocator)
			c.builder = c.strs
		}
		src.cols = append(src.cols, c)
	}
	for k := int64(0); k < s.RowOffset; k++ {
		if err := src.record(); err != nil {
			src.close()
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: %s: the split skips %d rows but the file ends after %d (did the file change since planning?)",
					ErrInput, s.URI, s.RowOffset, k)
			}
			return nil, err
		}
	}
	if s.Rows > 0 {
		src.left = s.Rows
	}
	return src, nil
}

// checkCSVSchema checks that a planned schema fits a CSV file's selected
// columns and holds only types the CSV reader builds.
func checkCSVSchema(schema *arrow.Schema, sel []string, uri string) error {
	if schema.NumFields() != len(sel) {
		return fmt.Errorf("%w: %s: the planned schema has columns %v, the file gives %v", ErrInput, uri, FieldNames(schema), sel)
	}
	for i, f := range schema.Fields() {
		if f.Name != sel[i] {
			return fmt.Errorf("%w: %s: column %d is %q, the planned schema says %q", ErrInput, uri, i, sel[i], f.Name)
		}
		switch f.Type.ID() {
		case arrow.INT64, arrow.FLOAT64, arrow.STRING:
		default:
			return fmt.Errorf("%w: %s: CSV column %q cannot be read as %s (want int64, float64 or utf8)", ErrInput, uri, f.Name, f.Type)
		}
	}
	return nil
}

// record moves to the next record of the split, checking its shape. It
// returns io.EOF at the end of the split.
func (s *csvSource) record() error {
	if s.done {
		return io.EOF
	}
	if s.left == 0 {
		s.done = true
		return io.EOF
	}
	if err := s.p.next(); err != nil {
		if errors.Is(err, io.EOF) {
			s.done = true
			if s.left > 0 {
				return fmt.Errorf("%w: %s: the split should hold %d more rows but the file ends (did the file change since planning?)",
					ErrInput, s.uri, s.left)
			}
		}
		return err
	}
	if s.left < 0 && s.end >= 0 && s.p.recOff >= s.end {
		s.done = true
		return io.EOF
	}
	if s.p.numFields() != s.nfields {
		return fmt.Errorf("%s: %d fields, want %d", s.p.where(), s.p.numFields(), s.nfields)
	}
	if s.left > 0 {
		s.left--
	}
	return nil
}

func (s *csvSource) next(ctx context.Context) (arrow.RecordBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows := 0
	for rows < s.batchRows {
		err := s.record()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.resetBuilders()
			return nil, err
		}
		for ci := range s.cols {
			if err := s.appendField(&s.cols[ci]); err != nil {
				s.resetBuilders()
				return nil, err
			}
		}
		rows++
	}
	if rows == 0 {
		return nil, io.EOF
	}
	arrs := make([]arrow.Array, len(s.cols))
	for i := range s.cols {
		arrs[i] = s.cols[i].builder.NewArray()
	}
	rec := array.NewRecordBatch(s.schema, arrs, int64(rows))
	for _, a := range arrs {
		a.Release()
	}
	return rec, nil
}

func (s *csvSource) appendField(c *csvColumn) error {
	b := s.p.field(c.fileIdx)
	switch {
	case c.strs != nil:
		c.strs.BinaryBuilder.Append(b)
	case len(b) == 0:
		c.builder.AppendNull()
	case c.ints != nil:
		v, ok := parseInt64(b)
		if !ok {
			return fmt.Errorf("%s: column %q: %q is not an int64 (the column's planned type)", s.p.where(), c.name, b)
		}
		c.ints.Append(v)
	default:
		v, err := strconv.ParseFloat(bytesString(b), 64)
		if err != nil {
			return fmt.Errorf("%s: column %q: %q is not a float64 (the column's planned type)", s.p.where(), c.name, b)
		}
		c.floats.Append(v)
	}
	return nil
}

// resetBuilders drops a half-built batch.
func (s *csvSource) resetBuilders() {
	for i := range s.cols {
		if a := s.cols[i].builder.NewArray(); a != nil {
			a.Release()
		}
	}
}

func (s *csvSource) close() error {
	for i := range s.cols {
		s.cols[i].builder.Release()
	}
	s.cols = nil
	return s.file.Close()
}
