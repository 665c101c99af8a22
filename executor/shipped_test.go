package executor

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
)

// entry is one member of a test archive.
type entry struct {
	name, body, link string
	mode             int64
	dir              bool
}

func writeTarGz(t *testing.T, path string, entries []entry) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeZip(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareShipped(t *testing.T) {
	src := t.TempDir()
	env := filepath.Join(src, "env.tar.gz")
	writeTarGz(t, env, []entry{
		{name: "bin/", dir: true},
		{name: "bin/python3.11", body: "#!/bin/sh\necho fake python\n", mode: 0o755},
		{name: "bin/python", link: "python3.11"},
		{name: "lib/site.py", body: "x = 1\n"},
	})
	lib := filepath.Join(src, "lib.zip")
	writeZip(t, lib, map[string]string{"mylib/__init__.py": "VALUE = 7\n"})
	helper := filepath.Join(src, "helper.py")
	if err := os.WriteFile(helper, []byte("def f(): pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	filesDir, procDir := filepath.Join(work, "files"), filepath.Join(work, "proc")
	if err := os.MkdirAll(procDir, 0o755); err != nil {
		t.Fatal(err)
	}
	task := &Task{
		Command:  []string{"python3", "train.py", "--lr", "0.1"},
		Archives: []string{env + "#env"},
		PyFiles:  []string{lib, helper},
		Python:   "env/bin/python",
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	cache := &archiveCache{root: filepath.Join(work, "cache")}
	got, err := prepareShipped(context.Background(), res, cache, task, filesDir, procDir)
	if err != nil {
		t.Fatal(err)
	}
	// The archive is unpacked under its alias, executable bits and links
	// kept, and appears in the working directory.
	out, err := os.ReadFile(filepath.Join(procDir, "env", "bin", "python"))
	if err != nil || !strings.Contains(string(out), "fake python") {
		t.Fatalf("env/bin/python in the working directory: %q, %v", out, err)
	}
	if st, err := os.Stat(filepath.Join(filesDir, "env", "bin", "python3.11")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("interpreter not executable: %v %v", st, err)
	}
	for _, name := range []string{"lib.zip", "helper.py"} {
		if _, err := os.Stat(filepath.Join(procDir, name)); err != nil {
			t.Errorf("--py-files %s not in the working directory: %v", name, err)
		}
	}
	wantCmd := []string{filepath.Join(filesDir, "env/bin/python"), "train.py", "--lr", "0.1"}
	if strings.Join(got.command, " ") != strings.Join(wantCmd, " ") {
		t.Errorf("command = %q, want %q", got.command, wantCmd)
	}
	wantPath := []string{filepath.Join(filesDir, "lib.zip"), filesDir}
	if strings.Join(got.pythonPath, ":") != strings.Join(wantPath, ":") {
		t.Errorf("PYTHONPATH entries = %q, want %q", got.pythonPath, wantPath)
	}
	env2 := prependPythonPath([]string{"A=1", "PYTHONPATH=/spindle"}, got.pythonPath)
	if env2[1] != "PYTHONPATH="+strings.Join(wantPath, ":")+":/spindle" {
		t.Errorf("PYTHONPATH = %q", env2[1])
	}
}

func TestPythonCommand(t *testing.T) {
	for arg0, want := range map[string]bool{
		"python": true, "python3": true, "/usr/bin/python3": true, "python3.11": true,
		"python3.": false, "pythonista": false, "bin/logreg": false, "torchrun": false,
	} {
		if got := isPythonCommand(arg0); got != want {
			t.Errorf("isPythonCommand(%q) = %v, want %v", arg0, got, want)
		}
	}
}
