package python

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// helperEnv makes the test binary unpack into the named directory and
// print the result, standing in for an executor process.
const helperEnv = "SPINDLE_PYTHON_UNPACK_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		got, err := Unpack(dir)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString(got + "\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// checkTree fails unless dir holds every embedded file with its content.
func checkTree(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := fs.WalkDir(FS(), PackageName, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, _ := fs.ReadFile(FS(), name)
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the embedded file", name)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("only %d files embedded", n)
	}
	if _, err := os.Stat(filepath.Join(dir, PackageName, "__init__.py")); err != nil {
		t.Fatal(err)
	}
}

// leftovers lists temporary directories an unpack left in cache.
func leftovers(t *testing.T, cache string) []string {
	t.Helper()
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestUnpackWritesTheEmbeddedPackage(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	dir, err := Unpack(cache)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, Version()); dir != want {
		t.Fatalf("unpacked into %s, want %s", dir, want)
	}
	checkTree(t, dir)
	again, err := Unpack(cache)
	if err != nil || again != dir {
		t.Fatalf("second unpack: %s, %v; want %s", again, err, dir)
	}
	if l := leftovers(t, cache); len(l) > 0 {
		t.Fatalf("temporary directories left behind: %v", l)
	}
	if len(Version()) != 16 {
		t.Fatalf("version %q is not 16 hex digits", Version())
	}
}

func TestUnpackImportsInPython(t *testing.T) {
	// The interpreter make test installs numpy and torch for, as the
	// other Python tests use; the first python3 on PATH may be another.
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no " + py)
	}
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		t.Skip(py + " has no numpy, which import spindle needs")
	}
	dir, err := Unpack(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", "import spindle, sys; sys.stdout.write(spindle.__file__)")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
	cmd.Dir = t.TempDir() // not the checkout, whose python/ could shadow the tree
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("import spindle: %v\n%s", err, out)
	}
	if want := filepath.Join(dir, PackageName, "__init__.py"); string(out) != want {
		t.Fatalf("spindle imported from %s, want %s", out, want)
	}
}

// TestUnpackConcurrentProcesses starts several processes that unpack into
// one empty cache at once, as executors starting together on one host do:
// every one gets the same whole tree and no temporary directory survives.
func TestUnpackConcurrentProcesses(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	const n = 6
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^$")
		cmds[i].Env = append(os.Environ(), helperEnv+"="+cache)
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(cache, Version())
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
		if got := strings.TrimSpace(outs[i].String()); got != want {
			t.Fatalf("process %d unpacked into %q, want %q", i, got, want)
		}
	}
	checkTree(t, want)
	if l := leftovers(t, cache); len(l) > 0 {
		t.Fatalf("temporary directories left behind: %v", l)
	}
}

func TestUnpackRepairsADamagedTree(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"truncated file", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, PackageName, "__init__.py"), 3); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, PackageName, "_env.py")); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty directory", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			dir, err := Unpack(cache)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, dir)
			again, err := Unpack(cache)
			if err != nil || again != dir {
				t.Fatalf("unpack after damage: %s, %v", again, err)
			}
			checkTree(t, dir)
			if l := leftovers(t, cache); len(l) > 0 {
				t.Fatalf("temporary directories left behind: %v", l)
			}
		})
	}
}

func TestUnpackRefusesACacheOthersCanWrite(t *testing.T) {
	cache := t.TempDir()
	if err := os.Chmod(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := Unpack(cache)
	if err == nil || !strings.Contains(err.Error(), cache) || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("got %v, want an error naming %s as writable by others", err, cache)
	}
}

func TestDirUsesXDGCacheHome(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(xdg, "spindle", "python", Version()); dir != want {
		t.Fatalf("Dir() = %s, want %s", dir, want)
	}
	checkTree(t, dir)
}

func TestDirFallsBackToTempDir(t *testing.T) {
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", blocked) // a file: no cache directory can be made under it
	t.Setenv("TMPDIR", tmp)
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, tmp+string(filepath.Separator)) {
		t.Fatalf("Dir() = %s, want a directory under %s", dir, tmp)
	}
	checkTree(t, dir)
}
