package feed

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/fsys"
)

// Unit is the smallest piece of a file a split is made of: a Parquet row
// group, an Arrow IPC record batch, or a chunk of CSV lines.
type Unit struct {
	Index  int   // row group or record batch index; CSV chunk number
	Rows   int64 // rows in the unit
	Off    int64 // byte range of the unit in the file
	Length int64
	Line   int64 // CSV: the line number at Off
}

// unit is a Unit as the readers build it.
type unit struct {
	index  int
	rows   int64
	off    int64
	length int64
	line   int64
}

// InspectOptions says how Inspect reads a file.
type InspectOptions struct {
	// CSV describes CSV files.
	CSV CSVOptions
	// CSVChunkBytes is the spacing of the record starts remembered in a
	// CSV file (its units): a split starts at one of them. Zero means
	// 1 MiB.
	CSVChunkBytes int64
}

// Inspect reads what planning needs of the file f, named uri, in format:
// every column of it (nil for an empty CSV file) and its units. CSV files
// are scanned whole, counting rows exactly and inferring column types.
// Errors about the file wrap ErrInput and name it.
func Inspect(ctx context.Context, f fsys.File, uri string, format Format, opts InspectOptions) (schema *arrow.Schema, units []Unit, err error) {
	var us []unit
	switch format {
	case FormatParquet:
		schema, us, err = inspectParquet(f, uri)
	case FormatArrow:
		schema, us, err = inspectIPC(f, uri)
	case FormatCSV:
		schema, us, err = inspectCSV(ctx, f, uri, opts)
	default:
		err = fmt.Errorf("%w: %s: unknown format %q", ErrInput, uri, format)
	}
	if err != nil {
		return nil, nil, err
	}
	units = make([]Unit, len(us))
	for i, u := range us {
		units[i] = Unit{Index: u.index, Rows: u.rows, Off: u.off, Length: u.length, Line: u.line}
	}
	return schema, units, nil
}

// inspectCSV scans a CSV file, compressed as a whole or not.
func inspectCSV(ctx context.Context, f fsys.File, uri string, opts InspectOptions) (*arrow.Schema, []unit, error) {
	in, err := csvInput(f, uri)
	if err != nil {
		return nil, nil, err
	}
	chunk := opts.CSVChunkBytes
	if chunk <= 0 {
		chunk = csvChunkBytes
	}
	if sf, ok := in.(*streamFile); ok {
		defer sf.closeStream()
		// A compressed file is read from its start: it is one unit,
		// shared by ranks (if need be) by skipping rows.
		chunk = math.MaxInt64
	}
	l, err := scanCSV(ctx, in, uri, opts.CSV, chunk)
	if err != nil {
		return nil, nil, err
	}
	return l.schema(), l.units, nil
}
