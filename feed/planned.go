package feed

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
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
	// CSVChunkBytes is the spacing of the record starts planning
	// remembers in a CSV file: a split starts at one of them and skips
	// at most this many bytes of rows. Zero means 1 MiB.
	CSVChunkBytes int64
	// Flight says how to reach the Arrow Flight services of grpc:// inputs.
	Flight FlightOptions
	// PartitionColumns are Hive-style partition keys (the key of key=value
	// directories, as in dt=2026-11-01/part-0.parquet) to read as columns
	// (spindle.input.partitionColumns): int64 when every value is an
	// integer, else utf8. They come after the file's columns and may be
	// selected, or be the label, like any other.
	PartitionColumns []string
	// DealEndpoints deals the endpoints of a flight whose per-endpoint row
	// counts are unknown (it has several, or gives no record count) to
	// ranks whole, without reading them: each endpoint is then fetched
	// once, by the rank that feeds it, and the plan's row counts are zero
	// (unknown, JobPlan.RowsUnknown): ranks that must keep in step count
	// their own as they first read them and agree on their batches then
	// (PipelineConfig.Agree). Without it such a flight's endpoints are
	// read once at planning to count their rows (an elastic job re-deals
	// rows by count).
	DealEndpoints bool
	// RetryUnavailable is how long planning keeps retrying while an input
	// file system cannot be reached (ErrUnavailable); zero means
	// DefaultRetryUnavailable, negative means no retry.
	RetryUnavailable time.Duration
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
	// It is all zeros when the rows are unknown (Flight endpoints dealt
	// whole and unread, PlanRequest.DealEndpoints).
	RowsPerRank []int64
	// TotalRows is the rows of every input together; zero when unknown.
	TotalRows int64
	// RowsUnknown says that the ranks' rows are not known until they read
	// their splits (PlanRequest.DealEndpoints).
	RowsUnknown bool
}

// DefaultRetryUnavailable is how long planning retries an input file
// system that cannot be reached: long enough for a namenode restart or
// failover, short enough that a wrong address is reported soon.
const DefaultRetryUnavailable = 30 * time.Second
