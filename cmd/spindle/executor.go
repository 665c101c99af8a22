package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/executor"
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/secretfd"
	"github.com/spindle-ml/spindle/internal/tlsgen"
)

// exitStopped is an executor's exit status when Spindle stopped its
// training process (128 + SIGTERM, as a shell reports it).
const exitStopped = 143

func executorCommand() *cli.Command {
	return &cli.Command{
		Name:   "executor",
		Usage:  "run one training rank (started by cluster managers, not by hand)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "driver", Usage: "driver control-plane `ADDR` (host:port)", Required: true},
			&cli.StringFlag{Name: "id", Usage: "executor `ID` given by the driver", Required: true},
			&cli.StringFlag{Name: "job", Usage: "job `ID`"},
			&cli.StringFlag{Name: "work-dir", Usage: "work `DIR` (default: a temporary directory)"},
			&cli.StringFlag{Name: "interface", Usage: "network `INTERFACE` whose address peers use"},
			&cli.StringFlag{Name: "log-level", Value: "info"},
			&cli.DurationFlag{Name: "register-timeout", Value: 5 * time.Minute},
			&cli.Int64Flag{Name: "archives-max-bytes", Usage: "most `BYTES` one --archives archive may unpack to (spindle.archives.maxBytes)"},
			&cli.IntFlag{Name: "archives-max-entries", Usage: "most `ENTRIES` one --archives archive may hold (spindle.archives.maxEntries)"},
		},
		Action: func(c *cli.Context) error {
			// Output goes to whoever started the executor; when that is
			// gone (a killed submit), writes fail instead of killing the
			// executor, which then stops its training processes itself.
			signal.Ignore(syscall.SIGPIPE)
			logger, err := newLogger(os.Stderr, c.String("log-level"))
			if err != nil {
				return cli.Exit(err, 2)
			}
			// The secrets come through an inherited pipe, never the
			// environment, which training processes could read in
			// /proc/PPID/environ; stray variables of those names are
			// dropped so nothing this process starts sees them.
			os.Unsetenv(executor.EnvJobSecret)
			os.Unsetenv(envcontract.JobTLS)
			secrets, err := secretfd.Take()
			if err != nil {
				return cli.Exit(fmt.Errorf("executor: %w", err), 2)
			}
			secret, bundle := secrets[executor.EnvJobSecret], secrets[envcontract.JobTLS]
			var jobTLS *tls.Config
			if bundle != "" {
				if jobTLS, err = tlsgen.ExecutorConfig(bundle); err != nil {
					return cli.Exit(fmt.Errorf("executor: the job TLS bundle (%s): %w", envcontract.JobTLS, err), 2)
				}
			}
			ex, err := executor.New(executor.Config{
				DriverAddr:      c.String("driver"),
				ID:              c.String("id"),
				JobID:           c.String("job"),
				Secret:          secret,
				TLS:             jobTLS,
				WorkDir:         c.String("work-dir"),
				Interface:       c.String("interface"),
				RegisterTimeout: c.Duration("register-timeout"),
				ArchiveLimits: executor.ArchiveLimits{
					MaxBytes:   c.Int64("archives-max-bytes"),
					MaxEntries: c.Int("archives-max-entries"),
				},
				Logger: logger.With("job", c.String("job")),
			})
			if err != nil {
				return cli.Exit(err, 2)
			}
			defer ex.Close()
			err = ex.Run(c.Context)
			switch {
			case errors.Is(err, executor.ErrStopped):
				// Spindle stopped it: not a failure, and the driver says
				// how the job ended; a line here would read like one.
				logger.Debug("training process stopped", "err", err)
				return cli.Exit("", exitStopped)
			case errors.Is(err, executor.ErrTrainingFailed):
				// The driver names the rank, its status and its stderr.
				logger.Debug("training process failed", "err", err)
				return cli.Exit("", exitJobFailed)
			}
			return err
		},
	}
}
