// Command datagen writes a synthetic classification data set drawn from a
// known logistic model, plus model.json with the true weights and the
// Bayes accuracy, for Spindle's examples and tests:
//
//	go run ./examples/datagen --out data/demo --rows 200000 --features 16 \
//	    --files 4 --format parquet --row-group-rows 10000 --seed 7 --classes 2
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spindle-ml/spindle/examples/datagen/datagen"
	"github.com/spindle-ml/spindle/feed"
)

func main() {
	d := datagen.DefaultConfig()
	var cfg datagen.Config
	var format string
	flag.StringVar(&cfg.Out, "out", "", "directory to write into (created when missing)")
	flag.Int64Var(&cfg.Rows, "rows", d.Rows, "total rows")
	flag.IntVar(&cfg.Features, "features", d.Features, "float32 feature columns f0..f{N-1}")
	flag.IntVar(&cfg.Files, "files", d.Files, "data files part-00000.<ext>, ...")
	flag.StringVar(&format, "format", string(d.Format), "parquet, arrow or csv")
	flag.IntVar(&cfg.RowGroupRows, "row-group-rows", d.RowGroupRows, "rows per Parquet row group or Arrow record batch")
	flag.Int64Var(&cfg.Seed, "seed", d.Seed, "random seed; the same seed gives the same files")
	flag.IntVar(&cfg.Classes, "classes", d.Classes, "label values (2: binary)")
	flag.StringVar(&cfg.Compression, "compression", d.Compression, "Parquet compression: snappy, zstd or none")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "datagen: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	f, err := feed.ParseFormat(format)
	if err != nil {
		fmt.Fprintf(os.Stderr, "datagen: --format: %v\n", err)
		os.Exit(2)
	}
	cfg.Format = f

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := datagen.Generate(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("wrote %d rows in %d %s files to %s (features=%d classes=%d bayes_accuracy=%.4f)\n",
		m.Rows, len(m.Files), m.Format, cfg.Out, m.Features, m.Classes, m.BayesAccuracy)
}
