package config

import (
	"fmt"
	"strings"
)

// Template renders conf/spindle-defaults.conf.template: every key with its
// documentation and default, commented out.
func Template() string {
	var b strings.Builder
	b.WriteString(`# Spindle defaults, read from $SPINDLE_CONF_DIR/spindle-defaults.conf.
#
# Copy this file to spindle-defaults.conf and uncomment what you change.
# Lines are "key value" (or key=value); # starts a comment, at the start of
# a line or after a space; a value may be quoted ("...", '...').
# Each key says which commands read it: one given to a command that does
# not read it (with --conf or --properties-file) is ignored with a warning.
# Precedence, lowest first: built-in defaults < this file <
# --properties-file < --conf key=value < explicit flags.
#
# Generated from the key table in internal/config; regenerate with
#   go test ./internal/config -run TestTemplate -update
`)
	section := ""
	for _, k := range Known() {
		parts := strings.SplitN(k.Name, ".", 3)
		if len(parts) >= 2 && parts[1] != section {
			section = parts[1]
			fmt.Fprintf(&b, "\n# ---- %s ----\n", section)
		}
		b.WriteString("\n")
		for _, line := range wrap(k.Doc, 76) {
			fmt.Fprintf(&b, "# %s\n", line)
		}
		kind := k.Kind.String()
		if k.Kind == Enum {
			var vals []string
			for _, e := range k.Enum {
				if e == "" {
					e = `""`
				}
				vals = append(vals, e)
			}
			kind = "one of " + strings.Join(vals, ", ")
		}
		fmt.Fprintf(&b, "# (%s; read by %s)\n", kind, k.Readers())
		switch {
		case k.Default == "" && k.Example != "":
			fmt.Fprintf(&b, "#%s %s\n", k.Name, k.Example)
		case k.Default == "":
			fmt.Fprintf(&b, "#%s=\n", k.Name)
		default:
			fmt.Fprintf(&b, "#%s %s\n", k.Name, k.Default)
		}
	}
	return b.String()
}

// wrap splits text into lines of at most width characters.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
