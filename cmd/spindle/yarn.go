package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/yarn"
)

// newYARNClusterManager builds the client-mode YARN cluster manager.
func newYARNClusterManager(ctx context.Context, p *config.Properties, logger *slog.Logger) (driver.ClusterManager, error) {
	cfg := yarn.ConfigFromProperties(p)
	cfg.Logger = logger
	return yarn.NewClusterManager(ctx, cfg)
}

// yarnAMCommand runs Spindle's ApplicationMaster inside its YARN container.
func yarnAMCommand() *cli.Command {
	return &cli.Command{
		Name:   "yarn-am",
		Usage:  "run a job's YARN ApplicationMaster (started by YARN, not by hand)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			logger, err := newLogger(os.Stderr, envOr("SPINDLE_LOG_LEVEL", "info"))
			if err != nil {
				return cli.Exit(err, exitUsage)
			}
			if err := yarn.RunAM(c.Context, logger); err != nil {
				return cli.Exit(err, exitJobFailed)
			}
			return nil
		},
	}
}

// yarnContainerCommand starts an executor inside its YARN container,
// taking its secret environment from the container's credentials.
func yarnContainerCommand() *cli.Command {
	return &cli.Command{
		Name:      "yarn-container",
		Usage:     "start a command inside a YARN container (started by the ApplicationMaster)",
		ArgsUsage: "-- SPINDLE-ARGS...",
		Hidden:    true,
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("yarn-container: no arguments after --", exitUsage)
			}
			if err := yarn.RunContainer(c.Args().Slice()); err != nil {
				return cli.Exit(err, exitJobFailed)
			}
			return nil
		},
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
