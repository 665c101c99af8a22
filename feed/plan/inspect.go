package plan

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"
)

// fileInfo is what planning learned about one input file.
type fileInfo struct {
	listedFile
	format feed.Format
	schema *arrow.Schema // every column of the file; nil for an empty CSV file
	units  []feed.Unit
	rows   int64 // -1: unknown (a Flight endpoint left unread)

	// An Arrow Flight endpoint (FormatFlight): its ticket, whether its
	// service speaks TLS, and the hosts it names; name is its address.
	ticket []byte
	tls    bool
	hosts  []string
}

// inspectFile reads what planning needs from one file.
func inspectFile(ctx context.Context, lf listedFile, format feed.Format, opts feed.InspectOptions) (*fileInfo, error) {
	if format == "" {
		var ok bool
		if format, ok = feed.FormatFromPath(lf.name); !ok {
			return nil, fmt.Errorf("%w: %s: cannot tell the format from the file name (name it .parquet, .arrow or .csv, or give --input-format)",
				feed.ErrInput, lf.uri)
		}
	}
	if c := feed.CompressionOf(lf.name); c != "" && format != feed.FormatCSV {
		return nil, fmt.Errorf("%w: %s: a %s file compressed as a whole (%s) is not read: %s compresses inside the file; decompress it",
			feed.ErrInput, lf.uri, format, strings.ToLower(path.Ext(lf.name)), format)
	}
	f, err := lf.fs.Open(ctx, lf.name)
	if err != nil {
		return nil, planError(ctx, "open "+lf.uri, err)
	}
	defer f.Close()
	info := &fileInfo{listedFile: lf, format: format}
	info.size = f.Size()
	if info.schema, info.units, err = feed.Inspect(ctx, f, lf.uri, format, opts); err != nil {
		return nil, err
	}
	for _, u := range info.units {
		info.rows += u.Rows
	}
	return info, nil
}

// inspectFlights asks each Flight input for its flight
// (feed.InspectFlights): one planning entry per endpoint, in input order,
// each one unit.
func inspectFlights(ctx context.Context, inputs []string, o feed.FlightOptions, count bool) ([]*fileInfo, [][]string, error) {
	eps, perInput, err := feed.InspectFlights(ctx, inputs, o, count)
	if err != nil {
		return nil, nil, err
	}
	infos := make([]*fileInfo, len(eps))
	for i, ep := range eps {
		infos[i] = &fileInfo{
			listedFile: listedFile{uri: ep.URI, name: ep.Addr},
			format:     feed.FormatFlight, schema: ep.Schema, rows: ep.Rows,
			units:  []feed.Unit{{Index: 0, Rows: ep.Rows}},
			ticket: ep.Ticket, tls: ep.TLS, hosts: ep.Hosts,
		}
	}
	return infos, perInput, nil
}
