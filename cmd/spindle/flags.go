package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/internal/config"
)

// keyFlag maps an explicit flag to the configuration key it sets.
type keyFlag struct {
	flag cli.Flag
	key  string
}

// commonFlags are the configuration flags every command that reads
// configuration takes, followed by its own key flags.
func commonFlags(fs []keyFlag) []cli.Flag {
	out := []cli.Flag{
		&cli.StringSliceFlag{Name: "conf", Usage: "set a configuration property, `KEY=VALUE` (repeatable)"},
		&cli.StringFlag{Name: "properties-file", Usage: "read properties from `FILE` (default: $SPINDLE_CONF_DIR/spindle-defaults.conf only)"},
	}
	for _, f := range fs {
		out = append(out, f.flag)
	}
	return out
}

// commandReaders says which keys each command reads, so that a key given
// to a command that ignores it is a warning.
var commandReaders = map[string]config.Reader{
	"submit": config.ReadBySubmit,
	// spindle predict reads spindle.models.dir too.
	"predict": config.ReadBySubmit | config.ReadByModel,
	"master":  config.ReadByMaster,
	"worker":  config.ReadByWorker,
	"status":  config.ReadByAdmin,
	"kill":    config.ReadByAdmin,
	"logs":    config.ReadByAdmin,
	// spindle model's subcommands also read the Hadoop client keys.
	"export":  config.ReadByModel | config.ReadBySubmit,
	"list":    config.ReadByModel | config.ReadBySubmit,
	"show":    config.ReadByModel | config.ReadBySubmit,
	"publish": config.ReadByModel | config.ReadBySubmit,
}

// loadKeyFlags merges every configuration source; explicit flags win.
func loadKeyFlags(c *cli.Context, fs []keyFlag) (*config.Properties, error) {
	return loadKeyFlagsWith(c, fs, nil)
}

// loadKeyFlagsWith is loadKeyFlags with settings a command decides for
// itself (spindle predict's feed), which win over every source but the
// explicit flags.
func loadKeyFlagsWith(c *cli.Context, fs []keyFlag, fixed []config.Setting) (*config.Properties, error) {
	src := config.Sources{
		ConfDir:        os.Getenv("SPINDLE_CONF_DIR"),
		PropertiesFile: c.String("properties-file"),
		Overrides:      c.StringSlice("conf"),
		Reader:         commandReaders[c.Command.Name],
	}
	src.Flags = append(src.Flags, fixed...)
	for _, f := range fs {
		name := f.flag.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		v := c.String(name)
		if _, ok := f.flag.(*cli.BoolFlag); ok {
			v = fmt.Sprint(c.Bool(name))
		}
		if lo, hi, ok := strings.Cut(v, ":"); ok && f.key == config.KeyExecutorInstances {
			// --num-executors MIN:MAX: an elastic job's range.
			src.Flags = append(src.Flags, config.Setting{Key: config.KeyFailureMinExecutors, Value: lo, Source: "--" + name})
			v = hi
		}
		src.Flags = append(src.Flags, config.Setting{Key: f.key, Value: v, Source: "--" + name})
	}
	props, warnings, err := config.Load(src)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		fmt.Fprintf(os.Stderr, "spindle: warning: %s\n", w)
	}
	return props, nil
}

// positionalArgs returns c's positional arguments, first applying the
// flags found among them: the CLI library stops parsing flags at the
// first argument, and spindle model export CHECKPOINT --out DIR reads
// as users write it. A "--" ends the flags.
func positionalArgs(c *cli.Context) ([]string, error) {
	bools := map[string]bool{}
	known := map[string]bool{}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			known[n] = true
			if _, ok := f.(*cli.BoolFlag); ok {
				bools[n] = true
			}
		}
	}
	var pos []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !known[name] {
			return nil, fmt.Errorf("unknown flag --%s for spindle %s", name, c.Command.FullName())
		}
		switch {
		case hasValue:
		case bools[name]:
			value = "true"
		case i+1 < len(args):
			i++
			value = args[i]
		default:
			return nil, fmt.Errorf("flag --%s needs a value", name)
		}
		if err := c.Set(name, value); err != nil {
			return nil, fmt.Errorf("--%s %s: %w", name, value, err)
		}
	}
	return pos, nil
}
