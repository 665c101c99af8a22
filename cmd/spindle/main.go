// Command spindle submits and runs distributed training jobs.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/textdist"
)

func main() {
	// The feed's Parquet page decoders, in front of arrow-go's codecs for
	// the whole process: the binary's choice, made here once.
	feed.RegisterPageCodecs()
	ctx, force, stop := interruptContext()
	defer stop()
	forceStop = force
	err := newApp().RunContext(ctx, os.Args)
	stop()
	if err != nil {
		// An empty message means the command has said what there is to say.
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(os.Stderr, "spindle: %s\n", msg)
		}
		os.Exit(exitCode(err))
	}
}

// exitCode is the process's exit status for an error a command returned.
func exitCode(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() != 0 {
		// The CLI library's own "No help topic" (spindle help NAME) is
		// bad input like any other.
		if ec.ExitCode() == 3 && strings.HasPrefix(err.Error(), "No help topic") {
			return exitUsage
		}
		return ec.ExitCode()
	}
	return exitJobFailed
}

func newApp() *cli.App {
	app := &cli.App{
		Name:                   "spindle",
		Usage:                  "distributed training on the YARN/HDFS clusters you already have",
		Version:                versionString(),
		HideVersion:            true,
		UseShortOptionHandling: false,
		// Values keep their commas, as spark-submit's do: --env
		// CUDA_VISIBLE_DEVICES=0,1 and --conf key=a,b are one value each.
		// Flags that take lists (--files) split them themselves.
		DisableSliceFlagSeparator: true,
		ExitErrHandler:            func(*cli.Context, error) {}, // main prints and exits
		OnUsageError:              usageError,
		Suggest:                   true, // spindle help NAME suggests a command
		Action:                    unknownCommand,
		Commands: []*cli.Command{
			submitCommand(),
			sessionCommand(),
			predictCommand(),
			statusCommand(),
			killCommand(),
			masterCommand(),
			workerCommand(),
			miniclusterCommand(),
			executorCommand(),
			yarnAMCommand(),
			yarnContainerCommand(),
			pythonPathCommand(),
			psCommand(),
			modelCommand(),
			historyCommand(),
			logsCommand(),
			tlsCommand(),
			doctorCommand(),
			rdmaCommand(),
			versionCommand(),
		},
	}
	for _, c := range app.Commands {
		if c.OnUsageError == nil {
			c.OnUsageError = usageError
		}
	}
	checkRequiredFlags(app.Commands, "spindle")
	return app
}

// checkRequiredFlags makes a required flag that was left out one line and
// exit status 2, like every other usage error: the CLI library's own check
// prints the command's whole help and ends with status 1. The flags stay
// marked "(required)" in the help.
func checkRequiredFlags(cmds []*cli.Command, parent string) {
	for _, c := range cmds {
		name := parent + " " + c.Name
		checkRequiredFlags(c.Subcommands, name)
		var required []string
		for _, f := range c.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
				sf.Required = false
				sf.Usage += " (required)"
				required = append(required, sf.Name)
			}
		}
		if len(required) == 0 {
			continue
		}
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			for _, f := range required {
				if !ctx.IsSet(f) {
					return cli.Exit(fmt.Sprintf("%s needs --%s; see %s --help", name, f, name), exitUsage)
				}
			}
			if before != nil {
				return before(ctx)
			}
			return nil
		}
	}
}

// usageError turns a flag the CLI library could not parse into one line
// and exit status 2, instead of the command's whole help.
func usageError(c *cli.Context, err error, isSubcommand bool) error {
	cmd := "spindle"
	if isSubcommand && c.Command != nil {
		cmd += " " + c.Command.Name
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		msg = fmt.Sprintf("unknown flag --%s for %s", strings.TrimPrefix(name, "-"), cmd)
		if c.Command != nil {
			if near := nearestFlag(c.Command.Flags, strings.TrimPrefix(name, "-")); near != "" {
				msg += fmt.Sprintf(" (did you mean --%s?)", near)
			}
		}
	} else {
		msg = fmt.Sprintf("%s (%s)", msg, cmd)
	}
	return cli.Exit(msg+"; see "+cmd+" --help", exitUsage)
}

// unknownCommand runs when no command matched: with no arguments it shows
// the help, otherwise it names the command it did not know.
func unknownCommand(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowAppHelp(c)
	}
	name := c.Args().First()
	msg := fmt.Sprintf("unknown command %q", name)
	if near := nearestCommand(c.App.Commands, name); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return cli.Exit(msg+"; see spindle --help", exitUsage)
}

// nearestCommand returns the visible command closest to name, or "" when
// none is close enough to be a likely typo.
func nearestCommand(cmds []*cli.Command, name string) string {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	return nearest(names, name)
}

// nearestFlag returns the flag name closest to name, or "".
func nearestFlag(flags []cli.Flag, name string) string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	return nearest(names, name)
}

func nearest(names []string, name string) string {
	best, bestD := "", len(name)/2+1
	for _, n := range names {
		if d := textdist.Levenshtein(strings.ToLower(name), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
