package feed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkHDFSSplits reads an epoch of 24 Parquet files, a split each,
// from HDFS (the protocol-level test cluster, on loopback) with one and
// two decode workers, each iteration once with the next split opened
// while the current one is read (openAhead) and once opening each split
// when the last one ends (the baseline), alternately in the same run. It
// reports both rates and their ratio. Opening a remote split costs the
// namenode's block locations, a datanode connection and the footer's
// read; on a real cluster those are network round trips, so loopback is
// the least the overlap saves.
func BenchmarkHDFSSplits(b *testing.B) {
	const files, rows = 24, 50_000
	c, res, hfs := newTestHDFS(b)
	ctx := context.Background()
	root := "hdfs://" + c.Addr() + "/in"
	for i := range files {
		local := writeParquet(b, filepath.Join(b.TempDir(), "part.parquet"), testSchema, int64(i*rows), rows, rows/2)
		data, err := os.ReadFile(local)
		if err != nil {
			b.Fatal(err)
		}
		upload(b, hfs, fmt.Sprintf("/in/part-%02d.parquet", i), data)
	}
	plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{root}, Ranks: 1, LabelColumn: "label"})
	if err != nil {
		b.Fatal(err)
	}
	if n := len(plan.Ranks[0]); n != files {
		b.Fatalf("%d splits, want one per file (%d)", n, files)
	}
	epoch := func(b *testing.B, workers int, ahead bool) time.Duration {
		defer func(was bool) { openAhead = was }(openAhead)
		openAhead = ahead
		start := time.Now()
		cfg := decodeBenchConfig(workers)
		cfg.Splits, cfg.Schema, cfg.LabelColumn = plan.Ranks[0], plan.Schema, "label"
		p, err := NewPipeline(res, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		if n := epochRows(b, p, 0); n != files*rows {
			b.Fatalf("read %d rows, want %d", n, files*rows)
		}
		return time.Since(start)
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			epoch(b, workers, true) // warm the datanodes' files and the pool
			var ahead, sequential time.Duration
			for b.Loop() {
				ahead += epoch(b, workers, true)
				sequential += epoch(b, workers, false)
			}
			b.ReportMetric(float64(files*rows*b.N)/ahead.Seconds(), "rows/s-ahead")
			b.ReportMetric(float64(files*rows*b.N)/sequential.Seconds(), "rows/s-sequential")
			b.ReportMetric(sequential.Seconds()/ahead.Seconds(), "ahead/sequential")
		})
	}
}
