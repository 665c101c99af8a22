package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

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
				err = server.RunFromEnv(ctx, env, logger)
				if errors.Is(err, task.ErrBadEnv) {
					return cli.Exit(err, exitUsage)
				}
				return err
			},
		}},
	}
}
