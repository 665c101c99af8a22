package feed

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	// (unknown). Ranks then yield different numbers of batches, so it is
	// for jobs whose ranks need not keep in step (evenBatches=off);
	// without it such a flight's endpoints are read once at planning to
	// count their rows.
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
}

// planParallelism bounds the files inspected at once.
const planParallelism = 4

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
	var infos []*fileInfo
	var perInput [][]string
	flights := 0
	for _, in := range req.Inputs {
		if IsFlightURI(in) {
			flights++
		}
	}
	if flights > 0 && flights < len(req.Inputs) {
		return nil, fmt.Errorf("%w: Arrow Flight inputs (grpc://) and files cannot be mixed in one job", ErrInput)
	}
	err = retryUnavailable(ctx, req.RetryUnavailable, func() error {
		if flights > 0 {
			infos, perInput, err = inspectFlights(ctx, req.Inputs, req.Flight, !req.DealEndpoints)
		} else {
			infos, perInput, err = listAndInspect(ctx, res, req, csvOpts)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := addPartitionColumns(infos, req.PartitionColumns); err != nil {
		return nil, err
	}

	schema, err := planSchema(infos, req.Columns, req.LabelColumn)
	if err != nil {
		return nil, err
	}

	if uncounted(infos) {
		return dealEndpoints(schema, infos, req.Ranks)
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

// listAndInspect lists the inputs and reads what planning needs of every
// file.
func listAndInspect(ctx context.Context, res *fsys.Resolver, req PlanRequest, csvOpts CSVOptions) ([]*fileInfo, [][]string, error) {
	listed, perInput, err := listInputs(ctx, res, req.Inputs, req.Format)
	if err != nil {
		return nil, nil, err
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
			return nil, nil, cerr
		}
		// Name the first bad file in input order; the error of a file
		// inspected after it may be just the cancellation it caused.
		for _, e := range errs {
			if e != nil && !errors.Is(e, context.Canceled) {
				return nil, nil, e
			}
		}
		return nil, nil, err
	}
	return infos, perInput, nil
}
