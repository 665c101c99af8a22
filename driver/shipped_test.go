package driver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validJob is a job that passes Validate, for tests to spoil one field.
func validJob() Config {
	c := DefaultConfig()
	c.Inputs = []string{"data/"}
	c.Command = []string{"python3", "train.py"}
	return c
}

func TestReservedEnv(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		gpus      int
		wantErr   string
	}{
		{"own variable", "MY_VAR", 0, ""},
		{"devices without --executor-gpus", "CUDA_VISIBLE_DEVICES", 0, ""},
		{"spindle rank", "SPINDLE_RANK", 0, "Spindle sets SPINDLE_RANK"},
		{"role", "SPINDLE_ROLE", 0, "SPINDLE_ROLE"},
		{"a spindle setting users make", "SPINDLE_PYARROW", 0, ""},
		{"torch rank", "RANK", 0, "Spindle sets RANK"},
		{"tf config", "TF_CONFIG", 0, "TF_CONFIG"},
		{"devices with --executor-gpus", "CUDA_VISIBLE_DEVICES", 1, "--executor-gpus 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validJob()
			c.GPUs = tc.gpus
			c.Env = map[string]string{tc.key: "7"}
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--env") {
				t.Fatalf("err = %v, want ErrConfig naming --env and %q", err, tc.wantErr)
			}
		})
	}
}

func TestShippedNames(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		files, pyFiles, archives []string
		wantErr                  string
	}{
		{"distinct", []string{"a/train.py", "hdfs:///x/conf.yaml"}, []string{"lib.zip"}, []string{"env.tar.gz#env"}, ""},
		{"same base name", []string{"a/train.py", "b/train.py"}, nil, nil, "--files a/train.py and --files b/train.py"},
		{"across flags", []string{"lib.zip"}, []string{"x/lib.zip"}, nil, "placed as lib.zip"},
		{"archive alias clash", []string{"env"}, nil, []string{"env.tar.gz#env"}, "--archives env.tar.gz#env"},
		{"archive without alias", nil, nil, []string{"env.tgz", "other/env.tgz"}, "env.tgz"},
		{"not an archive", nil, nil, []string{"env.rar#env"}, "not a .zip"},
		{"alias with a slash", nil, nil, []string{"env.zip#a/b"}, "not a file name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validJob()
			c.Files, c.PyFiles, c.Archives = tc.files, tc.pyFiles, tc.archives
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want ErrConfig with %q", err, tc.wantErr)
			}
		})
	}
}

func TestResolveShipped(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"train.py", "env.tar.gz", "lib.zip"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := validJob()
	c.Files = []string{"train.py", "hdfs:///user/me/conf.yaml", "file://" + filepath.Join(dir, "lib.zip")}
	c.Archives = []string{"env.tar.gz#env"}
	c.PyFiles = []string{"./lib.zip"}
	if err := c.ResolveShipped(dir); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Files:    []string{filepath.Join(dir, "train.py"), "hdfs:///user/me/conf.yaml", filepath.Join(dir, "lib.zip")},
		Archives: []string{filepath.Join(dir, "env.tar.gz") + "#env"},
		PyFiles:  []string{filepath.Join(dir, "lib.zip")},
	}
	if strings.Join(c.Files, " ") != strings.Join(want.Files, " ") || c.Archives[0] != want.Archives[0] || c.PyFiles[0] != want.PyFiles[0] {
		t.Fatalf("resolved files %v archives %v py-files %v, want %v %v %v", c.Files, c.Archives, c.PyFiles, want.Files, want.Archives, want.PyFiles)
	}
	for _, tc := range []struct {
		name    string
		set     func(*Config)
		wantErr string
	}{
		{"missing file", func(c *Config) { c.Files = []string{"nope.py"} }, "--files nope.py"},
		{"directory", func(c *Config) { c.Files = []string{"adir"} }, "not a regular file"},
		{"missing archive", func(c *Config) { c.Archives = []string{"gone.zip#env"} }, "--archives gone.zip"},
		{"missing py-file", func(c *Config) { c.PyFiles = []string{"/nowhere/x.py"} }, "--py-files /nowhere/x.py"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validJob()
			tc.set(&c)
			err := c.ResolveShipped(dir)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want ErrConfig with %q", err, tc.wantErr)
			}
		})
	}
}

// TestExecutorArgsCarryArchiveLimits checks that spindle.archives.*
// reach the executors, which unpack the archives.
func TestExecutorArgsCarryArchiveLimits(t *testing.T) {
	c := validJob()
	c.Archives = []string{"env.tgz#env"}
	c.ArchivesMaxBytes, c.ArchivesMaxEntries = 1<<20, 7
	d := &Driver{cfg: c}
	args := strings.Join(d.executorArgs("127.0.0.1:1", "e1"), " ")
	for _, want := range []string{"--archives-max-bytes 1048576", "--archives-max-entries 7"} {
		if !strings.Contains(args, want) {
			t.Errorf("executor arguments %q lack %q", args, want)
		}
	}
}
