package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/export"
	"github.com/spindle-ml/spindle/ps/server"
	"github.com/spindle-ml/spindle/task"
)

func psCommand() *cli.Command {
	return &cli.Command{
		Name:  "ps",
		Usage: "Spindle's parameter server (docs/ps.md)",
		Subcommands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve one shard of the job's tables (run by executors for the ranks of role ps; not by hand)",
			Flags: []cli.Flag{&cli.StringFlag{Name: "log-level", Value: "info"}},
			Action: func(c *cli.Context) error {
				logger, err := newLogger(os.Stderr, c.String("log-level"))
				if err != nil {
					return cli.Exit(err, exitUsage)
				}
				env, err := task.FromEnv()
				if err != nil {
					return cli.Exit(err, exitUsage)
				}
				// Executors stop a parameter server with SIGTERM when the
				// job ends: that is its normal end.
				ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, os.Interrupt)
				defer stop()
				ln, err := env.PeerListener()
				if err != nil {
					return cli.Exit(err, exitUsage)
				}
				err = server.Run(ctx, server.Rank{Ranks: env.PSRanks(), Listener: ln, Report: report}, logger)
				if errors.Is(err, ps.ErrBadEnv) {
					return cli.Exit(err, exitUsage)
				}
				return err
			},
		}, psExportCommand()},
	}
}

// psExportCommand writes a checkpoint's tables to Parquet after the job.
func psExportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write the tables of a parameter-server checkpoint to Parquet (key uint64, value list<float32>), one file per table",
		ArgsUsage: "CHECKPOINT",
		Description: "CHECKPOINT is the directory the job checkpointed its tables into (its latest complete\n" +
			"checkpoint is taken) or one checkpoint in it (clock-N); a local path or hdfs://.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Required: true, Usage: "directory (local or hdfs://) to write TABLE.parquet into"},
			&cli.StringFlag{Name: "table", Usage: "export this table only (default: every table)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("spindle ps export: want one CHECKPOINT directory", exitUsage)
			}
			res := fsys.NewResolver(fsys.Options{})
			defer res.Close()
			clock, files, err := export.Checkpoint(c.Context, res, c.Args().First(), c.String("table"), c.String("out"))
			if errors.Is(err, export.ErrNoCheckpoint) || errors.Is(err, export.ErrNoTable) {
				return cli.Exit(err.Error(), exitUsage)
			}
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			for _, f := range files {
				fmt.Fprintf(c.App.Writer, "%s: %d rows of dim %d (clock %d) -> %s\n", f.Table, f.Rows, f.Dim, clock, f.URI)
			}
			return nil
		},
	}
}

// report sends a parameter server's totals to the executor's report
// socket (the web UI and /metrics show them); outside a job it drops them.
func report(values map[string]float64) { _ = task.Report(0, values) }
