package feed

import (
	"fmt"
	"path"
	"strings"
)

// Format names an input file format.
type Format string

// The input formats Spindle reads.
const (
	FormatParquet Format = "parquet"
	FormatArrow   Format = "arrow" // Arrow IPC file format (random access, footer with a block table)
	FormatCSV     Format = "csv"
)

// ParseFormat turns a user-supplied format name into a Format.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "parquet", "pq":
		return FormatParquet, nil
	case "arrow", "ipc", "feather":
		return FormatArrow, nil
	case "csv":
		return FormatCSV, nil
	}
	return "", fmt.Errorf("unknown input format %q (want parquet, arrow or csv)", s)
}

// FormatFromPath infers a file's format from its extension. It returns
// false when the extension says nothing.
//
// A compression extension Hadoop writes text files with (.gz, .bz2, .zst,
// .deflate, ...) is looked past: train.csv.gz is CSV.
func FormatFromPath(p string) (Format, bool) {
	switch strings.ToLower(path.Ext(trimCodec(p))) {
	case ".parquet", ".pq":
		return FormatParquet, true
	case ".arrow", ".ipc", ".feather", ".arrows":
		return FormatArrow, true
	case ".csv", ".tsv", ".tab":
		return FormatCSV, true
	}
	return "", false
}

// Split is a piece of one input file assigned to one rank. Splits are
// planned by the driver, shipped to executors, and (in direct feed mode)
// written as JSON for the training process, so the JSON names are part of
// the documented contract (docs/feed-protocol.md).
type Split struct {
	// URI names the file: file:///abs/path or hdfs://namenode:port/path.
	URI    string `json:"uri"`
	Format Format `json:"format"`
	// RowGroups lists the Parquet row groups of this split.
	RowGroups []int `json:"row_groups,omitempty"`
	// Batches lists the record batches (by index in the file's footer) of an Arrow IPC file.
	Batches []int `json:"batches,omitempty"`
	// Offset and Length bound a CSV split in bytes. The split owns every
	// line that starts inside [Offset, Offset+Length); the header line, if
	// any, is never part of a split.
	Offset int64 `json:"offset,omitempty"`
	Length int64 `json:"length,omitempty"`
	// Line is the 1-based line number at Offset in a CSV file, for error
	// messages; 0 when unknown.
	Line int64 `json:"line,omitempty"`
	// RowOffset is the number of rows to skip at the start of the split's
	// first row group, record batch or line, so that several ranks can
	// share one large row group: the split holds the Rows rows that follow.
	// A CSV split then holds the Rows lines after skipping RowOffset lines
	// from its first line, and neighbouring splits may share byte ranges.
	RowOffset int64 `json:"row_offset,omitempty"`
	// Rows is the exact number of rows in the split.
	Rows int64 `json:"rows"`
	// Hosts are the hosts that hold the split's bytes (HDFS datanodes), most bytes first.
	Hosts []string `json:"hosts,omitempty"`
	// Partitions are the values of the partition columns for the split's
	// rows (spindle.input.partitionColumns), taken from key=value
	// directories on the file's path; readers add them as columns.
	Partitions map[string]string `json:"partitions,omitempty"`
	// Ticket is the Arrow Flight ticket of a FormatFlight split's endpoint.
	Ticket []byte `json:"ticket,omitempty"`
}
