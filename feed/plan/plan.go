package plan

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/fsys"

	"github.com/spindle-ml/spindle/feed"
)

// planParallelism bounds the files inspected at once.
const planParallelism = 4

// Plan lists the inputs, reads their footers (CSV files are scanned
// whole, counting rows exactly and inferring column types: integers become
// int64, other numbers float64, anything else utf8, widened across
// files), checks that every file holds the selected columns with the same
// types, and deals the rows to req.Ranks ranks in file order so that
// ranks differ by at most one row. Every error about the input wraps
// ErrInput and names the input, file or column at fault.
func Plan(ctx context.Context, res *fsys.Resolver, req feed.PlanRequest) (*feed.JobPlan, error) {
	if req.Ranks <= 0 {
		return nil, fmt.Errorf("%w: %d ranks: need at least one", feed.ErrInput, req.Ranks)
	}
	if len(req.Inputs) == 0 {
		return nil, fmt.Errorf("%w: no inputs", feed.ErrInput)
	}
	if req.Format != "" {
		f, err := feed.ParseFormat(string(req.Format))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", feed.ErrInput, err)
		}
		req.Format = f
	}
	csvOpts, err := req.CSV.Normalize()
	if err != nil {
		return nil, err
	}
	var infos []*fileInfo
	var perInput [][]string
	flights := 0
	for _, in := range req.Inputs {
		if feed.IsFlightURI(in) {
			flights++
		}
	}
	if flights > 0 && flights < len(req.Inputs) {
		return nil, fmt.Errorf("%w: Arrow Flight inputs (grpc://) and files cannot be mixed in one job", feed.ErrInput)
	}
	err = retryUnavailable(ctx, req.RetryUnavailable, func() error {
		if flights > 0 {
			infos, perInput, err = inspectFlights(ctx, req.Inputs, req.Flight, !req.DealEndpoints)
		} else {
			infos, perInput, err = listAndInspect(ctx, res, req, feed.InspectOptions{CSV: csvOpts, CSVChunkBytes: req.CSVChunkBytes})
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
	plan := &feed.JobPlan{Schema: schema}
	for _, fi := range infos {
		rowsOf[fi.uri] = fi.rows
		plan.TotalRows += fi.rows
		plan.Files = append(plan.Files, feed.PlannedFile{URI: fi.uri, Format: fi.format, Rows: fi.rows, Bytes: fi.size, Units: len(fi.units)})
	}
	for i, uris := range perInput {
		var rows int64
		for _, u := range uris {
			rows += rowsOf[u]
		}
		if rows == 0 {
			return nil, fmt.Errorf("%w: input %s has no rows", feed.ErrInput, req.Inputs[i])
		}
	}
	if plan.TotalRows < int64(req.Ranks) {
		return nil, fmt.Errorf("%w: the inputs hold %d rows, fewer than the %d ranks (every rank needs at least one row)",
			feed.ErrInput, plan.TotalRows, req.Ranks)
	}
	plan.Ranks, plan.RowsPerRank, err = deal(ctx, infos, req.Ranks)
	if err != nil {
		return nil, err
	}
	return plan, nil
}

// listAndInspect lists the inputs and reads what planning needs of every
// file.
func listAndInspect(ctx context.Context, res *fsys.Resolver, req feed.PlanRequest, opts feed.InspectOptions) ([]*fileInfo, [][]string, error) {
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
			infos[i], errs[i] = inspectFile(gctx, listed[i], req.Format, opts)
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
