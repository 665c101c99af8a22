package feed

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
)

// unit is the smallest piece of a file a split is made of: a Parquet row
// group, an Arrow IPC record batch, or a chunk of CSV lines.
type unit struct {
	index  int   // row group or record batch index; CSV chunk number
	rows   int64 // rows in the unit
	off    int64 // byte range of the unit in the file
	length int64
	line   int64 // CSV: the line number at off
}

// fileInfo is what planning learned about one input file.
type fileInfo struct {
	listedFile
	format Format
	schema *arrow.Schema // every column of the file; nil for an empty CSV file
	units  []unit
	rows   int64 // -1: unknown (a Flight endpoint left unread)

	// An Arrow Flight endpoint (FormatFlight): its ticket, whether its
	// service speaks TLS, and the hosts it names; name is its address.
	ticket []byte
	tls    bool
	hosts  []string
}

// inspectFile reads what planning needs from one file.
func inspectFile(ctx context.Context, lf listedFile, format Format, csvOpts CSVOptions) (*fileInfo, error) {
	if format == "" {
		var ok bool
		if format, ok = FormatFromPath(lf.name); !ok {
			return nil, fmt.Errorf("%w: %s: cannot tell the format from the file name (name it .parquet, .arrow or .csv, or give --input-format)",
				ErrInput, lf.uri)
		}
	}
	if c := codecOf(lf.name); c != nil && format != FormatCSV {
		return nil, fmt.Errorf("%w: %s: a %s file compressed as a whole (%s) is not read: %s compresses inside the file; decompress it",
			ErrInput, lf.uri, format, c.ext, format)
	}
	f, err := lf.fs.Open(ctx, lf.name)
	if err != nil {
		return nil, planError(ctx, "open "+lf.uri, err)
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
		var in csvFile
		if in, err = csvInput(f, lf.uri); err != nil {
			break
		}
		chunk := csvChunkBytes
		if sf, ok := in.(*streamFile); ok {
			defer sf.closeStream()
			// A compressed file is read from its start: it is one unit,
			// shared by ranks (if need be) by skipping rows.
			chunk = math.MaxInt64
		}
		var l *csvLayout
		if l, err = scanCSV(ctx, in, lf.uri, csvOpts, chunk); err == nil {
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
