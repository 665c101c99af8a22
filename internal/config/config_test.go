package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite conf/spindle-defaults.conf.template")

func writeConf(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	p, warnings, err := Load(Sources{})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("Load: %v %v", err, warnings)
	}
	for _, k := range Known() {
		if got := p.String(k.Name); got != k.Default {
			t.Errorf("%s = %q, want default %q", k.Name, got, k.Default)
		}
		if p.Source(k.Name) != "default" {
			t.Errorf("%s source = %q", k.Name, p.Source(k.Name))
		}
		// Every default must itself be valid.
		if err := k.check(k.Default); err != nil && !(k.Kind == Enum && k.Default == "") {
			t.Errorf("default of %s is invalid: %v", k.Name, err)
		}
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	writeConf(t, dir, DefaultsFileName, "spindle.executor.instances 3\nspindle.feed.epochs 2\nspindle.feed.batchRows 10\nspindle.feed.seed 1\n")
	props := writeConf(t, dir, "job.conf", "spindle.feed.epochs 4\nspindle.feed.batchRows 20\nspindle.feed.seed 2\n")
	p, _, err := Load(Sources{
		ConfDir:        dir,
		PropertiesFile: props,
		Overrides:      []string{"spindle.feed.batchRows=30", "spindle.feed.seed=3"},
		Flags:          []Setting{{Key: KeySeed, Value: "4", Source: "--seed"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key    string
		want   int
		source string
	}{
		{KeyExecutorInstances, 3, filepath.Join(dir, DefaultsFileName) + ":1"},
		{KeyEpochs, 4, props + ":1"},
		{KeyBatchRows, 30, "--conf"},
		{KeySeed, 4, "--seed"},
		{KeyPrefetchBatches, 8, "default"},
	} {
		if got := p.Int(tc.key); got != tc.want {
			t.Errorf("%s = %d, want %d", tc.key, got, tc.want)
		}
		if got := p.Source(tc.key); got != tc.source {
			t.Errorf("%s source = %q, want %q", tc.key, got, tc.source)
		}
	}
}

func TestGoodFiles(t *testing.T) {
	p, warnings, err := Load(Sources{PropertiesFile: "testdata/full.good.conf"})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Load: %v %v", err, warnings)
	}
	if p.Int(KeyExecutorInstances) != 4 || p.Int(KeyBatchRows) != 256 || !p.Bool(KeyShuffle) ||
		p.Bytes(KeyFeedMemory) != 64<<20 || p.Duration(KeyHeartbeatTimeout) != 9*time.Second {
		t.Errorf("values not parsed: %+v", p.Settings())
	}
	if got := strings.Join(p.List(KeyInputColumns), "|"); got != "f0|f1|f2" {
		t.Errorf("columns = %q", got)
	}
	// Trailing comments go, quotes are taken off, a # inside a word stays.
	for key, want := range map[string]string{
		KeyEpochs:        "3",
		KeyAppName:       "my #1 job",
		KeyCheckpointDir: "/data/ckpt dir",
		KeyLabelColumn:   "label#2",
	} {
		if got := p.String(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
}

// TestBadFiles checks that every bad file fails naming the file, the line
// and the key.
func TestBadFiles(t *testing.T) {
	want := map[string][]string{
		"malformed-line.bad.conf": {"malformed-line.bad.conf:2", "this-line-has-no-value"},
		"not-an-int.bad.conf":     {"not-an-int.bad.conf:1", KeyExecutorInstances, `"two" is not an integer`},
		"bad-enum.bad.conf":       {"bad-enum.bad.conf:3", KeyFeedMode, "arrow, tensor, direct"},
		"bad-size.bad.conf":       {"bad-size.bad.conf:1", KeyFeedMemory, "not a size"},
		"bad-duration.bad.conf":   {"bad-duration.bad.conf:1", KeyHeartbeatTimeout, "not a duration"},
		"below-min.bad.conf":      {"below-min.bad.conf:1", KeyBatchRows, "minimum"},
		"bad-bool.bad.conf":       {"bad-bool.bad.conf:1", KeyShuffle},
		"zero-duration.bad.conf":  {"zero-duration.bad.conf:1", KeyHeartbeatInterval, "zero duration"},
		"port-range.bad.conf":     {"port-range.bad.conf:1", KeyDriverPort, "maximum 65535"},
		"bad-addr.bad.conf":       {"bad-addr.bad.conf:1", KeyMasterAddr, "0 to 65535"},
		"unclosed-quote.bad.conf": {"unclosed-quote.bad.conf:1", KeyAppName, "no closing"},
		"relative-cache.bad.conf": {"relative-cache.bad.conf:2", KeyYARNBinaryCache, "neither off nor an absolute path"},
	}
	files, _ := filepath.Glob("testdata/*.bad.conf")
	if len(files) != len(want) {
		t.Fatalf("%d bad files, %d expectations", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, _, err := Load(Sources{PropertiesFile: f})
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Load(%s) = %v, want ErrInvalid", f, err)
			}
			for _, s := range want[filepath.Base(f)] {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestUnknownKeySuggests(t *testing.T) {
	_, warnings, err := Load(Sources{Overrides: []string{"spindle.executor.instnces=3", "totally.unrelated=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 2 {
		t.Fatalf("warnings = %v", warnings)
	}
	if !strings.Contains(warnings[0], `did you mean "spindle.executor.instances"`) {
		t.Errorf("no suggestion in %q", warnings[0])
	}
	if strings.Contains(warnings[1], "did you mean") {
		t.Errorf("far-off key got a suggestion: %q", warnings[1])
	}
}

func TestBadOverride(t *testing.T) {
	for _, o := range []string{"no-equals-sign", "=value", "spindle.feed.epochs=zero"} {
		_, _, err := Load(Sources{Overrides: []string{o}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--conf") {
			t.Errorf("override %q: err = %v", o, err)
		}
	}
}

func TestMissingPropertiesFile(t *testing.T) {
	_, _, err := Load(Sources{PropertiesFile: filepath.Join(t.TempDir(), "nope.conf")})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.conf") {
		t.Fatalf("err = %v", err)
	}
	// A missing defaults file is fine: admins need not have one.
	if _, _, err := Load(Sources{ConfDir: t.TempDir()}); err != nil {
		t.Fatalf("missing defaults file: %v", err)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "64k": 64 << 10, "256m": 256 << 20, "2g": 2 << 30, "1GiB": 1 << 30, "3MB": 3 << 20} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "-1", "1.5g", "lots"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", in)
		}
	}
}

// TestTemplate keeps conf/spindle-defaults.conf.template in step with the
// key table: every key documented with its default.
func TestTemplate(t *testing.T) {
	path := filepath.Join("..", "..", "conf", "spindle-defaults.conf.template")
	want := Template()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run go test ./internal/config -run TestTemplate -update", path)
	}
	// And the template, uncommented, loads cleanly with the defaults.
	var lines []string
	for _, l := range strings.Split(want, "\n") {
		if strings.HasPrefix(l, "#spindle.") {
			lines = append(lines, strings.TrimPrefix(l, "#"))
		}
	}
	if len(lines) != len(Known()) {
		t.Fatalf("template has %d keys, table %d", len(lines), len(Known()))
	}
	f := writeConf(t, t.TempDir(), "all.conf", strings.Join(lines, "\n"))
	if _, warnings, err := Load(Sources{PropertiesFile: f}); err != nil || len(warnings) > 0 {
		t.Fatalf("uncommented template: %v %v", err, warnings)
	}
}

func TestMissingConfDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	_, _, err := Load(Sources{ConfDir: dir})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "SPINDLE_CONF_DIR") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v, want one naming SPINDLE_CONF_DIR and %s", err, dir)
	}
}

func TestZeroDurations(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{KeyHeartbeatInterval, false},
		{KeyRegistrationTimeout, false},
		{KeyProgressInterval, false},
		{KeyCollectiveTimeout, false},
		{KeyStopGracePeriod, true},
	} {
		t.Run(tc.key, func(t *testing.T) {
			_, _, err := Load(Sources{Overrides: []string{tc.key + "=0s"}})
			if (err == nil) != tc.ok {
				t.Fatalf("%s=0s: err = %v, want ok=%v", tc.key, err, tc.ok)
			}
		})
	}
}

// TestLevels checks that each setting knows how high its source ranks,
// which lets callers resolve two keys that must agree (spindle.master
// local[N] and spindle.executor.instances) in favour of the higher one.
func TestLevels(t *testing.T) {
	dir := t.TempDir()
	writeConf(t, dir, DefaultsFileName, "spindle.master local[3]\n")
	props := writeConf(t, dir, "job.conf", "spindle.feed.epochs 4\n")
	p, _, err := Load(Sources{
		ConfDir: dir, PropertiesFile: props,
		Overrides: []string{"spindle.feed.seed=3"},
		Flags:     []Setting{{Key: KeyExecutorInstances, Value: "2", Source: "--num-executors"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]Level{
		KeyMaster: LevelDefaultsFile, KeyEpochs: LevelPropertiesFile, KeySeed: LevelConf,
		KeyExecutorInstances: LevelFlag, KeyBatchRows: LevelDefault,
	} {
		if got := p.Level(key); got != want {
			t.Errorf("level of %s = %d, want %d", key, got, want)
		}
	}
}

// TestReaderWarnings checks that a key given to a command that does not
// read it is a warning, except from the shared defaults file.
func TestReaderWarnings(t *testing.T) {
	dir := t.TempDir()
	writeConf(t, dir, DefaultsFileName, "spindle.master.workerTimeout 9s\nspindle.worker.cores 4\n")
	for _, tc := range []struct {
		name   string
		reader Reader
		src    Sources
		want   string
	}{
		{"master key to submit", ReadBySubmit, Sources{Overrides: []string{"spindle.master.workerTimeout=3s"}},
			"--conf: spindle.master.workerTimeout is read by spindle master, not by spindle submit; ignored here"},
		{"job key to worker", ReadByWorker, Sources{Overrides: []string{"spindle.feed.epochs=3"}},
			"spindle.feed.epochs is read by spindle submit, not by spindle worker"},
		{"shared key", ReadByWorker, Sources{Overrides: []string{"spindle.cluster.secretFile=/s", "spindle.log.level=warn"}}, ""},
		{"gang timeout to submit", ReadBySubmit, Sources{Overrides: []string{"spindle.standalone.gangTimeout=5s"}}, ""},
		{"defaults file", ReadBySubmit, Sources{ConfDir: dir}, ""},
		{"no reader", 0, Sources{Overrides: []string{"spindle.master.workerTimeout=3s"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.src.Reader = tc.reader
			_, warnings, err := Load(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(warnings, "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTemplateSuggestsEventLogDir: the shipped template suggests an event
// log directory, so that sites set one and spindle logs can show an ended
// job's output.
func TestTemplateSuggestsEventLogDir(t *testing.T) {
	if !strings.Contains(Template(), "\n#"+KeyEventLogDir+" hdfs:///") {
		t.Fatalf("the template does not suggest a value for %s", KeyEventLogDir)
	}
}
