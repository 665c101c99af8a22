package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func versionString() string {
	rev := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		}
	}
	if rev != "" {
		return fmt.Sprintf("%s (%s, %s)", version, rev, runtime.Version())
	}
	return fmt.Sprintf("%s (%s)", version, runtime.Version())
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print Spindle's version",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "spindle %s\n", versionString())
			return nil
		},
	}
}
