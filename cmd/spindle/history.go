package main

import (
	"fmt"
	"net"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/metrics"
	"github.com/spindle-ml/spindle/observe/webui"
)

// historyCommand serves the job pages for every job whose event log is in
// a directory: finished jobs, and running ones as far as their logs go.
func historyCommand() *cli.Command {
	return &cli.Command{
		Name:  "history",
		Usage: "serve the web UI for the jobs in an event log directory (spindle.eventLog.dir)",
		Description: "Jobs write their event logs when spindle.eventLog.dir is set. The history server lists them\n" +
			"(search by name or id, filter by state) and shows each job's page as its driver showed it.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "event log directory: a path, file:// or hdfs:// `URI`", Required: true},
			&cli.StringFlag{Name: "address", Value: "127.0.0.1:18080", Usage: "`HOST:PORT` to serve on (port 0 picks one)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.BoolFlag{Name: "token", Usage: "require an access token, made at start and printed here only (event logs hold every rank's output)"},
		},
		Action: func(c *cli.Context) error {
			logger, err := newLogger(os.Stderr, c.String("log-level"))
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			if _, _, err := net.SplitHostPort(c.String("address")); err != nil {
				return cli.Exit(fmt.Sprintf("--address %q: want HOST:PORT", c.String("address")), exitUsage)
			}
			res := fsys.NewResolver(fsys.Options{})
			defer res.Close()
			dir := c.String("dir")
			// A directory that cannot be listed is bad input, found before serving.
			src := webui.NewHistory(res, dir)
			if _, err := src.Jobs(c.Context); err != nil {
				return cli.Exit(fmt.Sprintf("--dir %s: %v", dir, err), exitUsage)
			}
			reg := metrics.NewRegistry()
			token, query := "", ""
			if c.Bool("token") {
				token = webui.NewToken()
				query = "?token=" + token
			}
			srv, err := webui.Listen(c.String("address"), webui.RequireToken(token, webui.Handler(src, metrics.Handler(reg))), logger)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			fmt.Fprintf(c.App.ErrWriter, "history server for %s at http://%s/%s\n", dir, srv.Addr(), query)
			return srv.Run(c.Context)
		},
	}
}
