package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/testbed/scaletest"
)

// yarnReport runs each world size through the real ApplicationMaster
// against simulated NodeManagers shaped by shape (its Ranks and Dir are
// set here), runs times, and prints the run of median
// submit-to-registered time of each as a table.
func yarnReport(ctx context.Context, w io.Writer, sizes []int, runs int, shape scaletest.YARNOptions) error {
	var medians []*scaletest.YARNResult
	for _, n := range sizes {
		var rs []*scaletest.YARNResult
		for range runs {
			dir, err := os.MkdirTemp("", "scalereport-yarn-")
			if err != nil {
				return err
			}
			opts := shape
			opts.Ranks, opts.Dir = n, dir
			res, err := scaletest.RunYARN(ctx, opts)
			os.RemoveAll(dir)
			if err != nil {
				return fmt.Errorf("%d ranks through the ApplicationMaster: %w", n, err)
			}
			rs = append(rs, res)
		}
		slices.SortFunc(rs, func(a, b *scaletest.YARNResult) int { return cmp.Compare(a.SubmitToRegistered, b.SubmitToRegistered) })
		medians = append(medians, rs[len(rs)/2])
		fmt.Fprintf(os.Stderr, "scalereport: %d ranks through the ApplicationMaster done\n", n)
	}
	writeYARNTable(w, medians)
	return nil
}

// writeYARNTable prints one column per world size.
func writeYARNTable(w io.Writer, rs []*scaletest.YARNResult) {
	row := rower(w, rs)
	row("ranks (YARN)", func(r *scaletest.YARNResult) string { return strconv.Itoa(r.Ranks) })
	fmt.Fprintln(w, "|"+strings.Repeat(" --- |", len(rs)+1))
	row("simulated NodeManagers", func(r *scaletest.YARNResult) string { return strconv.Itoa(r.Nodes) })
	row("AM allocate round trips to hold the gang", func(r *scaletest.YARNResult) string { return strconv.Itoa(r.AllocateCalls) })
	row("time to hold the gang", func(r *scaletest.YARNResult) string { return ms(r.GangHeld) })
	row("AM CPU to hold the gang (with the test RM)", func(r *scaletest.YARNResult) string { return ms(r.AMCPU) })
	row("gang held to every container started", func(r *scaletest.YARNResult) string { return ms(r.Launched) })
	row("submit to every rank registered", func(r *scaletest.YARNResult) string { return ms(r.SubmitToRegistered) })
	row("process CPU, submit to every rank registered", func(r *scaletest.YARNResult) string { return ms(r.CPU) })
	row("process RSS (AM, driver, RM, NMs, executors)", func(r *scaletest.YARNResult) string {
		return fmt.Sprintf("%.0f MiB", float64(r.RSSBytes)/(1<<20))
	})
}
