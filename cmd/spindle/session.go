package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/internal/warm"
	"github.com/spindle-ml/spindle/python"
)

// sessionCommand wires `spindle session start|stop|list` to the session
// client in the Python package this binary carries: a session's ranks are
// Python interpreters, and the package already holds both ends.
func sessionCommand() *cli.Command {
	pyFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "python", Value: "python3", Usage: "the `PYTHON` that runs the session client (and, unless --rank-python, the ranks)"}
	}
	return &cli.Command{
		Name:  "session",
		Usage: "keep warm ranks for many short Python jobs (spindle submit --session ID)",
		Description: "A session is a job whose ranks import the --preload modules once, then fork a fresh process\n" +
			"for each `spindle submit --session ID -- python SCRIPT` run in it, so those start in the time a\n" +
			"fork takes and nothing passes from one to the next. With --input, each run reads --epochs\n" +
			"epochs of the session's feed, every row once per epoch. The master is local (local[N]), standalone\n" +
			"(spindle://) or yarn.",
		Subcommands: []*cli.Command{
			{
				Name:  "start",
				Usage: "start a session in the background and print its ID",
				Flags: []cli.Flag{
					pyFlag(),
					&cli.IntFlag{Name: "num-executors", Value: 2, Usage: "the session's `N` ranks"},
					&cli.StringFlag{Name: "master", Usage: "local[N] (the default, N = --num-executors), spindle://... or yarn"},
					&cli.StringSliceFlag{Name: "preload", Usage: "`MODULE`s every rank imports once (repeatable or comma-separated)"},
					&cli.StringFlag{Name: "rank-python", Usage: "the `PYTHON` the ranks run (default: --python)"},
					&cli.StringSliceFlag{Name: "input", Usage: "the session's input `URI`s (repeatable, globs), as submit's; each run reads --epochs epochs of them"},
					&cli.StringFlag{Name: "input-format", Usage: "parquet, arrow or csv (default: from the names)"},
					&cli.StringFlag{Name: "label-column", Usage: "the label `COLUMN`, sent last"},
					&cli.StringFlag{Name: "feed", Usage: "arrow, tensor or direct, as submit's"},
					&cli.IntFlag{Name: "epochs", Value: 1, Usage: "the `N` epochs each run of the session reads"},
					&cli.IntFlag{Name: "batch-rows", Usage: "rows per batch (default: submit's)"},
					&cli.StringSliceFlag{Name: "conf", Usage: "`KEY=VALUE` properties of the session's job (repeatable)"},
				},
				Action: func(c *cli.Context) error {
					return runSessionClient(c, c.String("python"), sessionStartArgs(c)...)
				},
			},
			{
				Name:      "stop",
				Usage:     "stop a session's ranks and end its job",
				ArgsUsage: "ID",
				Flags:     []cli.Flag{pyFlag()},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return cli.Exit("spindle session stop takes one session ID (spindle session list shows them)", exitUsage)
					}
					return runSessionClient(c, c.String("python"), "stop", c.Args().First())
				},
			},
			{
				Name:   "list",
				Usage:  "list this user's running sessions",
				Flags:  []cli.Flag{pyFlag()},
				Action: func(c *cli.Context) error { return runSessionClient(c, c.String("python"), "list") },
			},
		},
	}
}

// sessionStartArgs are the session client's arguments for `spindle
// session start`'s flags.
func sessionStartArgs(c *cli.Context) []string {
	args := []string{"start", "--num-executors", fmt.Sprint(c.Int("num-executors")), "--epochs", fmt.Sprint(c.Int("epochs"))}
	for _, name := range []string{"master", "input-format", "label-column", "feed"} {
		if v := c.String(name); v != "" {
			args = append(args, "--"+name, v)
		}
	}
	if p := c.String("rank-python"); p != "" {
		args = append(args, "--python", p)
	}
	if n := c.Int("batch-rows"); n > 0 {
		args = append(args, "--batch-rows", fmt.Sprint(n))
	}
	for _, name := range []string{"preload", "input", "conf"} {
		for _, v := range c.StringSlice(name) {
			args = append(args, "--"+name, v)
		}
	}
	return args
}

// submitToSession runs `spindle submit --session ID -- COMMAND`: the
// command goes to the session's warm ranks; the job's other flags belong
// to the session, so any given here is refused.
func submitToSession(c *cli.Context, id string) error {
	for _, f := range c.LocalFlagNames() {
		if f != "session" {
			return cli.Exit(fmt.Sprintf("spindle submit --session: --%s belongs to the session (spindle session start), not to one of its runs", f), exitUsage)
		}
	}
	argv, err := warm.PythonArgv(c.Args().Slice())
	if err != nil {
		return cli.Exit(strings.TrimPrefix(err.Error(), warm.ErrBadRun.Error()+": "), exitUsage)
	}
	rec, err := warm.Load(warm.RegistryDir(), id)
	if err != nil {
		return cli.Exit(strings.TrimPrefix(err.Error(), warm.ErrBadRun.Error()+": "), exitUsage)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return cli.Exit(fmt.Sprintf("the working directory: %v", err), exitUsage)
	}
	if err := warm.Submit(c.Context, rec, argv, cwd, c.App.Writer, c.App.ErrWriter); err != nil {
		if errors.Is(err, warm.ErrBadRun) {
			return cli.Exit(strings.TrimPrefix(err.Error(), warm.ErrBadRun.Error()+": "), exitUsage)
		}
		return cli.Exit(fmt.Sprintf("session %s: %v", id, err), exitJobFailed)
	}
	return nil
}

// runSessionClient runs the session client (python -m spindle._session_cli
// ARGS) with this binary's package and this binary, passing its exit
// status on.
func runSessionClient(c *cli.Context, py string, args ...string) error {
	dir, err := python.Dir()
	if err != nil {
		return cli.Exit(err.Error(), exitJobFailed)
	}
	self, err := os.Executable()
	if err != nil {
		return cli.Exit(fmt.Sprintf("find this spindle binary: %v", err), exitJobFailed)
	}
	cmd := exec.CommandContext(c.Context, py, append([]string{"-m", "spindle._session_cli"}, args...)...)
	pp := dir
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pp += string(os.PathListSeparator) + old
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pp, "SPINDLE_BINARY="+self)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.App.Writer, c.App.ErrWriter
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return cli.Exit("", ee.ExitCode())
	default:
		return cli.Exit(fmt.Sprintf("spindle session: run %s: %v", strings.Join(cmd.Args[:3], " "), err), exitUsage)
	}
}
