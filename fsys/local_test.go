package fsys

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(root, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLocalGlob(t *testing.T) {
	root := filepath.ToSlash(t.TempDir())
	writeFiles(t, root, "a/p-1.parquet", "a/p-0.parquet", "a/p-2.csv", "b/p-0.parquet", "a-b/p-9.parquet", "x[1]/q")
	ctx := context.Background()
	tests := []struct {
		pattern string
		want    []string
	}{
		{"/a/*.parquet", []string{"/a/p-0.parquet", "/a/p-1.parquet"}},
		{"/*/p-0.parquet", []string{"/a/p-0.parquet", "/b/p-0.parquet"}},
		{"/a*/p-?.*", []string{"/a-b/p-9.parquet", "/a/p-0.parquet", "/a/p-1.parquet", "/a/p-2.csv"}},
		{"/a/p-[01].parquet", []string{"/a/p-0.parquet", "/a/p-1.parquet"}},
		{"/a/p-0.parquet", []string{"/a/p-0.parquet"}},
		{"/a", []string{"/a"}},
		{"/a/missing.parquet", nil},
		{"/missing/*.parquet", nil},
		{"/a/p-0.parquet/*", nil},
		{`/x\[1\]/*`, []string{"/x[1]/q"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			got, err := Local().Glob(ctx, root+tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, root+w)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Glob(%s) = %v, want %v", tt.pattern, got, want)
			}
		})
	}
	t.Run("bad pattern", func(t *testing.T) {
		_, err := Local().Glob(ctx, root+"/a/[")
		if !errors.Is(err, path.ErrBadPattern) || !strings.Contains(err.Error(), "/a/[") {
			t.Errorf("err = %v, want ErrBadPattern naming the pattern", err)
		}
	})
}

func TestLocalOpenStatReadDir(t *testing.T) {
	root := filepath.ToSlash(t.TempDir())
	writeFiles(t, root, "d/b.txt", "d/a.txt")
	ctx := context.Background()
	lfs := Local()

	f, err := lfs.Open(ctx, root+"/d/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != int64(len("d/a.txt")) {
		t.Errorf("Size = %d", f.Size())
	}
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 2); err != nil || string(buf) != "a.t" {
		t.Errorf("ReadAt = %q, %v", buf, err)
	}
	if _, err := f.ReadAt(buf, 6); !errors.Is(err, io.EOF) {
		t.Errorf("ReadAt past the end: err = %v, want io.EOF", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	errTests := []struct {
		name string
		call func() error
		want error
	}{
		{"open missing", func() error { _, err := lfs.Open(ctx, root+"/d/zz"); return err }, fs.ErrNotExist},
		{"stat missing", func() error { _, err := lfs.Stat(ctx, root+"/zz"); return err }, fs.ErrNotExist},
		{"readdir missing", func() error { _, err := lfs.ReadDir(ctx, root+"/zz"); return err }, fs.ErrNotExist},
		{"remove missing", func() error { return lfs.Remove(ctx, root+"/zz") }, fs.ErrNotExist},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var pe *fs.PathError
			if !errors.Is(err, tt.want) || !errors.As(err, &pe) || !strings.Contains(err.Error(), "zz") {
				t.Errorf("err = %v, want a *fs.PathError naming the file, wrapping %v", err, tt.want)
			}
		})
	}
	t.Run("open directory", func(t *testing.T) {
		if _, err := lfs.Open(ctx, root+"/d"); err == nil || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("err = %v, want 'is a directory'", err)
		}
	})

	infos, err := lfs.ReadDir(ctx, root+"/d")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name())
	}
	if !reflect.DeepEqual(names, []string{"a.txt", "b.txt"}) {
		t.Errorf("ReadDir = %v", names)
	}
	if locs, err := lfs.Locations(ctx, root+"/d/a.txt", 0, 3); locs != nil || err != nil {
		t.Errorf("Locations = %v, %v; want nil, nil", locs, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := lfs.Stat(cctx, root+"/d"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat with a cancelled context: err = %v", err)
	}
}

func TestLocalCreateAtomic(t *testing.T) {
	ctx := context.Background()
	lfs := Local()
	dirEntries := func(t *testing.T, dir string) []string {
		t.Helper()
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range es {
			n = append(n, e.Name())
		}
		return n
	}

	t.Run("commit publishes", func(t *testing.T) {
		dir := t.TempDir()
		name := filepath.ToSlash(filepath.Join(dir, "out.json"))
		if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		af, err := lfs.CreateAtomic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(af, "new contents"); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(name); string(b) != "old" {
			t.Errorf("before Commit the final name holds %q, want the old file", b)
		}
		if got := dirEntries(t, dir); len(got) != 2 || !strings.HasPrefix(got[0], ".out.json.tmp-") {
			t.Errorf("while writing the directory holds %v, want a hidden temporary beside out.json", got)
		}
		if err := af.Commit(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(name); string(b) != "new contents" {
			t.Errorf("after Commit the file holds %q", b)
		}
		if got := dirEntries(t, dir); !reflect.DeepEqual(got, []string{"out.json"}) {
			t.Errorf("after Commit the directory holds %v", got)
		}
		if fi, _ := os.Stat(name); fi.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644", fi.Mode().Perm())
		}
		if err := af.Abort(); err != nil {
			t.Errorf("Abort after Commit: %v", err)
		}
		if _, err := af.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
			t.Errorf("Write after Commit: err = %v, want os.ErrClosed", err)
		}
		if err := af.Commit(); err == nil {
			t.Error("a second Commit succeeded")
		}
	})

	t.Run("abort removes", func(t *testing.T) {
		dir := t.TempDir()
		name := filepath.ToSlash(filepath.Join(dir, "ckpt.bin"))
		af, err := lfs.CreateAtomic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := af.Write([]byte("partial")); err != nil {
			t.Fatal(err)
		}
		if err := af.Abort(); err != nil {
			t.Fatal(err)
		}
		if got := dirEntries(t, dir); len(got) != 0 {
			t.Errorf("after Abort the directory holds %v", got)
		}
		if err := af.Abort(); err != nil {
			t.Errorf("second Abort: %v", err)
		}
	})

	t.Run("missing directory", func(t *testing.T) {
		name := filepath.ToSlash(filepath.Join(t.TempDir(), "no", "such", "f"))
		_, err := lfs.CreateAtomic(ctx, name)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), name) {
			t.Errorf("err = %v, want ErrNotExist naming %s", err, name)
		}
	})

	t.Run("mkdir rename remove", func(t *testing.T) {
		dir := filepath.ToSlash(t.TempDir())
		if err := lfs.MkdirAll(ctx, dir+"/x/y"); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, "x/y/f")
		if err := lfs.Rename(ctx, dir+"/x/y/f", dir+"/x/g"); err != nil {
			t.Fatal(err)
		}
		if _, err := lfs.Stat(ctx, dir+"/x/g"); err != nil {
			t.Fatal(err)
		}
		if err := lfs.Remove(ctx, dir+"/x/g"); err != nil {
			t.Fatal(err)
		}
	})
}
