package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/python"
)

// pythonPathCommand prints where the spindle Python package this binary
// carries is unpacked, for users who run Python by hand:
// PYTHONPATH=$(spindle python-path) python3 -c 'import spindle'.
func pythonPathCommand() *cli.Command {
	return &cli.Command{
		Name:  "python-path",
		Usage: "print a directory to put on PYTHONPATH for `import spindle` (unpacks the package this binary carries)",
		Description: "Executors give training processes this directory themselves; the command is for running\n" +
			"Python by hand: PYTHONPATH=$(spindle python-path) python3 train.py. The package is unpacked\n" +
			"once per version into $XDG_CACHE_HOME/spindle/python (~/.cache/spindle/python), or into DIR.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "cache-dir", Usage: "unpack under `DIR` instead of the user's cache directory"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cli.Exit(fmt.Sprintf("spindle python-path takes no arguments, got %q", c.Args().First()), exitUsage)
			}
			var dir string
			var err error
			if cache := c.String("cache-dir"); cache != "" {
				dir, err = python.Unpack(cache)
			} else {
				dir, err = python.Dir()
			}
			if err != nil {
				return cli.Exit(err.Error(), exitJobFailed)
			}
			fmt.Fprintln(c.App.Writer, dir)
			return nil
		},
	}
}
