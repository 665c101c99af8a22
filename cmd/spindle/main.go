// Command spindle submits and runs distributed training jobs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newApp().RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "spindle: %v\n", err)
		var ec cli.ExitCoder
		if errors.As(err, &ec) && ec.ExitCode() != 0 {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:                   "spindle",
		Usage:                  "distributed training on the YARN/HDFS clusters you already have",
		Version:                versionString(),
		HideVersion:            true,
		UseShortOptionHandling: false,
		ExitErrHandler:         func(*cli.Context, error) {}, // main prints and exits
		Commands: []*cli.Command{
			submitCommand(),
			statusCommand(),
			killCommand(),
			masterCommand(),
			workerCommand(),
			miniclusterCommand(),
			executorCommand(),
			versionCommand(),
		},
	}
}
