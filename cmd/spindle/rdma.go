package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/rdma"
	"github.com/spindle-ml/spindle/rdma/check"
)

// rdmaCommand groups the RDMA tools.
func rdmaCommand() *cli.Command {
	return &cli.Command{
		Name:        "rdma",
		Usage:       "inspect this host's RDMA devices and test the links between two hosts",
		Subcommands: []*cli.Command{rdmaCheckCommand()},
	}
}

func rdmaCheckCommand() *cli.Command {
	def := check.DefaultConfig()
	return &cli.Command{
		Name:      "check",
		Usage:     "list this host's RDMA devices and what a job would use; with --listen/--peer, measure latency and bandwidth between two hosts over the TCP and UCX links",
		UsageText: "spindle rdma check [--devices LIST] [--listen :PORT | --peer HOST:PORT]",
		Description: "On one host run spindle rdma check --listen :PORT; it prints a token unless " + check.EnvToken + " is set.\n" +
			"On the other run " + check.EnvToken + "=TOKEN spindle rdma check --peer HOST:PORT. Both print the\n" +
			"round-trip latency and the bandwidth each way over Spindle's TCP link and over its UCX link\n" +
			"(InfiniBand or RoCE when UCX finds a device; UCX_TLS and UCX_NET_DEVICES choose as in a job).\n" +
			"Exit status 2: bad input found before anything ran (a peer that cannot be reached or holds\n" +
			"another token, a bad token, device list or sysfs root); 1: a test failed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "devices", Usage: "devices a job may use, as spindle.rdma.devices (`LIST`), to show what it would select"},
			&cli.StringFlag{Name: "mode", Value: "auto", Usage: "spindle.rdma.mode to show the selection for: auto, required or off"},
			&cli.StringFlag{Name: "listen", Usage: "wait for one peer on `ADDR` (:PORT, HOST:PORT; port 0 picks one)"},
			&cli.StringFlag{Name: "peer", Usage: "test the links to the listener at `HOST:PORT`"},
			&cli.IntFlag{Name: "pings", Value: def.Pings, Usage: "round trips timed per link"},
			&cli.IntFlag{Name: "mib", Value: def.Bytes >> 20, Usage: "MiB sent each way per link for the bandwidth"},
			&cli.DurationFlag{Name: "timeout", Value: def.Timeout, Usage: "how long to wait for the other host"},
			// A directory laid out as /sys, instead of this host's: a copy
			// of another host's, or a test's fake tree.
			&cli.StringFlag{Name: "sysfs", Hidden: true, Value: "/"},
		},
		Action: runRDMACheck,
	}
}

func runRDMACheck(c *cli.Context) error {
	w := c.App.Writer
	listen, peer := c.String("listen"), c.String("peer")
	if listen != "" && peer != "" {
		return cli.Exit("--listen and --peer: give one (the listening host, or the one that connects to it)", exitUsage)
	}
	mode, err := rdma.ParseMode(c.String("mode"))
	if err != nil {
		return cli.Exit("--mode: "+err.Error(), exitUsage)
	}
	filter, err := rdma.ParseFilter(c.String("devices"))
	if err != nil {
		return cli.Exit("--devices: "+err.Error(), exitUsage)
	}
	devs, err := check.Devices(c.String("sysfs"))
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	host, _ := os.Hostname()
	fmt.Fprintf(w, "host %s\n", host)
	check.WriteDevices(w, devs, mode, filter)
	fmt.Fprintln(w, ucxLine())
	if listen == "" && peer == "" {
		return nil
	}

	cfg := check.DefaultConfig()
	cfg.Pings, cfg.Bytes, cfg.Timeout = c.Int("pings"), c.Int("mib")<<20, c.Duration("timeout")
	cfg.MessageBytes = min(cfg.MessageBytes, max(cfg.Bytes, 1))
	logger, err := newLogger(c.App.ErrWriter, "info")
	if err != nil {
		return err
	}
	cfg.Logger = logger.With("component", "rdma-check")
	cfg.Token = os.Getenv(check.EnvToken)
	var results []check.Result
	if listen != "" {
		printToken := cfg.Token == ""
		if printToken {
			if cfg.Token, err = check.NewToken(); err != nil {
				return err
			}
		}
		l, err := check.Listen(listen, cfg)
		if err != nil {
			return checkExit(err)
		}
		fmt.Fprintf(w, "listening on %s\n", l.Addr())
		if printToken {
			fmt.Fprintf(w, "token %s (on the peer: %s=%s spindle rdma check --peer HOST:%s)\n",
				cfg.Token, check.EnvToken, cfg.Token, portOf(l.Addr().String()))
		}
		var from string
		from, results, err = l.Serve(c.Context)
		if err != nil {
			return checkExit(err)
		}
		fmt.Fprintf(w, "checked with %s\n", from)
	} else {
		start := time.Now()
		results, err = check.Dial(c.Context, peer, cfg)
		if err != nil {
			return checkExit(err)
		}
		fmt.Fprintf(w, "checked with %s in %s\n", peer, time.Since(start).Round(time.Millisecond))
	}
	for _, r := range results {
		fmt.Fprintln(w, r)
	}
	return nil
}

// checkExit is exit status 2 for bad input, 1 for a check that failed.
func checkExit(err error) error {
	if errors.Is(err, check.ErrBadInput) {
		return cli.Exit(err.Error(), exitUsage)
	}
	return cli.Exit(err.Error(), exitJobFailed)
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}
