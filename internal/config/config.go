package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/internal/textdist"
)

// DefaultsFileName is the admin's defaults file inside $SPINDLE_CONF_DIR.
const DefaultsFileName = "spindle-defaults.conf"

// ErrInvalid is wrapped by every error about a bad key or value.
var ErrInvalid = errors.New("config: invalid configuration")

// Setting is a value given for a key, with where it came from.
type Setting struct {
	Key    string
	Value  string
	Source string // "default", "/etc/spindle/spindle-defaults.conf:12", "--conf", "--num-executors"
	// Level is the precedence of the source; Load sets it.
	Level Level
}

// Level is the precedence of a configuration source: a setting from a
// higher level overrides one from a lower.
type Level int

// Configuration sources, lowest precedence first.
const (
	LevelDefault        Level = iota // the key table's built-in default
	LevelDefaultsFile                // $SPINDLE_CONF_DIR/spindle-defaults.conf
	LevelPropertiesFile              // --properties-file
	LevelConf                        // --conf key=value
	LevelFlag                        // an explicit flag such as --num-executors
)

// Sources lists the configuration sources of one load, lowest precedence first
// after the built-in defaults.
type Sources struct {
	// ConfDir holds spindle-defaults.conf; empty skips it.
	ConfDir string
	// PropertiesFile is an extra properties file; empty skips it.
	PropertiesFile string
	// Overrides are --conf key=value settings, in order.
	Overrides []string
	// Flags are explicit command-line flags, already mapped to keys.
	Flags []Setting
	// Reader is the command loading the configuration. When set, a key it
	// does not read that is given by --properties-file, --conf or a flag
	// is a warning: it would otherwise do nothing, silently. The shared
	// defaults file may hold every command's keys and is not checked.
	Reader Reader
}

// Properties is a loaded, validated configuration.
type Properties struct {
	settings map[string]Setting
}

// Load applies the built-in defaults and every source in order and
// validates the result. Warnings (unknown keys) are returned beside a nil
// error; any invalid value is an error naming its source and key.
func Load(src Sources) (*Properties, []string, error) {
	p := &Properties{settings: map[string]Setting{}}
	for _, k := range Known() {
		p.settings[k.Name] = Setting{Key: k.Name, Value: k.Default, Source: "default", Level: LevelDefault}
	}
	var warnings []string
	apply := func(s Setting, level Level) error {
		s.Level = level
		k, ok := Lookup(s.Key)
		if !ok {
			w := fmt.Sprintf("%s: unknown key %q", s.Source, s.Key)
			if near := Nearest(s.Key); near != "" {
				w += fmt.Sprintf(" (did you mean %q?)", near)
			}
			warnings = append(warnings, w+"; ignored")
			return nil
		}
		if err := k.check(s.Value); err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrInvalid, s.Source, s.Key, err)
		}
		if src.Reader != 0 && level > LevelDefaultsFile && k.Readers()&src.Reader == 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %s is read by %s, not by %s; ignored here",
				s.Source, s.Key, k.Readers(), src.Reader))
		}
		p.settings[s.Key] = s
		return nil
	}
	if src.ConfDir != "" {
		if st, err := os.Stat(src.ConfDir); err != nil || !st.IsDir() {
			return nil, nil, fmt.Errorf("%w: SPINDLE_CONF_DIR is %s, which is not a directory; point it at the directory holding %s, or unset it",
				ErrInvalid, src.ConfDir, DefaultsFileName)
		}
		path := filepath.Join(src.ConfDir, DefaultsFileName)
		settings, err := readFile(path, true)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range settings {
			if err := apply(s, LevelDefaultsFile); err != nil {
				return nil, nil, err
			}
		}
	}
	if src.PropertiesFile != "" {
		settings, err := readFile(src.PropertiesFile, false)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range settings {
			if err := apply(s, LevelPropertiesFile); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, o := range src.Overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, nil, fmt.Errorf("%w: --conf %q: want key=value", ErrInvalid, o)
		}
		if err := apply(Setting{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v), Source: "--conf"}, LevelConf); err != nil {
			return nil, nil, err
		}
	}
	for _, f := range src.Flags {
		if err := apply(f, LevelFlag); err != nil {
			return nil, nil, err
		}
	}
	return p, warnings, nil
}

// readFile parses a properties file. A missing file is an error unless
// optional is set.
func readFile(path string, optional bool) ([]Setting, error) {
	f, err := os.Open(path)
	if err != nil {
		if optional && errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read properties file: %w", err)
	}
	defer f.Close()
	return parse(f, path)
}

// parse reads "key value", "key=value" or "key: value" lines; blank lines
// and lines starting with # or ! are comments, and so is the rest of a line
// from a # that follows a space. A value in matching single or double
// quotes is taken without them (and may then hold " #").
func parse(r io.Reader, name string) ([]Setting, error) {
	var out []Setting
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		i := strings.IndexAny(text, " \t=:")
		if i <= 0 {
			return nil, fmt.Errorf("%w: %s:%d: %q is not a \"key value\" line", ErrInvalid, name, line, text)
		}
		key := text[:i]
		rest := strings.TrimLeft(text[i:], " \t")
		if rest != "" && (rest[0] == '=' || rest[0] == ':') {
			rest = strings.TrimLeft(rest[1:], " \t")
		}
		source := fmt.Sprintf("%s:%d", name, line)
		value, err := parseValue(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s: %v", ErrInvalid, source, key, err)
		}
		out = append(out, Setting{Key: key, Value: value, Source: source})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}

// parseValue takes a value's text after its key: without a trailing
// comment, and without the quotes around a quoted value.
func parseValue(text string) (string, error) {
	if text != "" && (text[0] == '"' || text[0] == '\'') {
		q := text[0]
		end := strings.IndexByte(text[1:], q)
		if end < 0 {
			return "", fmt.Errorf("the value %s has no closing %c", text, q)
		}
		value, after := text[1:1+end], strings.TrimSpace(text[2+end:])
		if after != "" && after[0] != '#' {
			return "", fmt.Errorf("%q follows the quoted value; put a comment after a #", after)
		}
		return value, nil
	}
	for i := 1; i < len(text); i++ {
		if text[i] == '#' && (text[i-1] == ' ' || text[i-1] == '\t') {
			return strings.TrimSpace(text[:i]), nil
		}
	}
	return strings.TrimSpace(text), nil
}

// check validates a value against the key's kind and its Check.
func (k Key) check(v string) error {
	if err := k.checkKind(v); err != nil || k.Check == nil {
		return err
	}
	return k.Check(v)
}

// checkKind validates a value against the key's kind.
func (k Key) checkKind(v string) error {
	switch k.Kind {
	case Int:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		if k.HasMin && n < k.Min {
			return fmt.Errorf("%d is below the minimum %d", n, k.Min)
		}
		if k.HasMax && n > k.Max {
			return fmt.Errorf("%d is above the maximum %d", n, k.Max)
		}
	case Bool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
	case Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration (like 500ms, 10s, 2m)", v)
		}
		if d < 0 {
			return fmt.Errorf("%s is negative", v)
		}
		if d == 0 && !k.ZeroOK {
			return fmt.Errorf("%s: a zero duration is not allowed here", v)
		}
	case HostPort:
		return checkHostPort(v)
	case Bytes:
		n, err := ParseBytes(v)
		if err != nil {
			return err
		}
		if k.HasMin && n < k.Min {
			return fmt.Errorf("%s is below the minimum %d bytes", v, k.Min)
		}
	case Enum:
		for _, e := range k.Enum {
			if v == e {
				return nil
			}
		}
		var shown []string
		for _, e := range k.Enum {
			if e != "" {
				shown = append(shown, e)
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(shown, ", "))
	}
	return nil
}

// ParseBytes parses a size such as 512, 64k, 256m or 2g (binary units,
// an optional trailing "b" or "ib").
func ParseBytes(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "b"), "i")
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (like 512m or 2g)", v)
	}
	return n * mult, nil
}

func (p *Properties) get(key string) Setting {
	s, ok := p.settings[key]
	if !ok {
		panic("config: undeclared key " + key)
	}
	return s
}

// String returns the value of key.
func (p *Properties) String(key string) string { return p.get(key).Value }

// Source says where key's value came from.
func (p *Properties) Source(key string) string { return p.get(key).Source }

// Level says how high the source of key's value is in the precedence.
func (p *Properties) Level(key string) Level { return p.get(key).Level }

// Int returns the value of an Int key. Values were validated by Load.
func (p *Properties) Int(key string) int {
	n, _ := strconv.Atoi(p.get(key).Value)
	return n
}

// Bool returns the value of a Bool key.
func (p *Properties) Bool(key string) bool {
	b, _ := strconv.ParseBool(p.get(key).Value)
	return b
}

// Duration returns the value of a Duration key.
func (p *Properties) Duration(key string) time.Duration {
	d, _ := time.ParseDuration(p.get(key).Value)
	return d
}

// Bytes returns the value of a Bytes key.
func (p *Properties) Bytes(key string) int64 {
	n, _ := ParseBytes(p.get(key).Value)
	return n
}

// List returns the value of a List key, split on commas, without empty items.
func (p *Properties) List(key string) []string {
	var out []string
	for _, s := range strings.Split(p.get(key).Value, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Settings returns every setting, sorted by key.
func (p *Properties) Settings() []Setting {
	out := make([]Setting, 0, len(p.settings))
	for _, s := range p.settings {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Nearest returns the known key closest to name by edit distance, or ""
// when none is close enough to be a likely typo.
func Nearest(name string) string {
	best, bestD := "", len(name)/2+2
	for _, k := range Known() {
		if d := textdist.Levenshtein(strings.ToLower(name), strings.ToLower(k.Name)); d < bestD {
			best, bestD = k.Name, d
		}
	}
	return best
}

// checkHostPort validates a "host:port" address with a port from 0 to
// 65535; the host may be empty (every interface).
func checkHostPort(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%q is not host:port (an IPv6 host goes in brackets, as in [::1]:7077)", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("the port of %q is not a number from 0 to 65535", v)
	}
	return nil
}
