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
	"sync"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
)

// member is one entry of an attack archive: a regular file (body), a
// symbolic link (symlink) or a hard link (hardlink, tar only).
type member struct {
	name, body, symlink, hardlink string
}

// buildArchive writes members as a .tar, .tgz or .zip file in dir.
func buildArchive(t testing.TB, dir, format string, members []member) string {
	t.Helper()
	var buf bytes.Buffer
	if format == "zip" {
		zw := zip.NewWriter(&buf)
		for _, m := range members {
			h := &zip.FileHeader{Name: m.name, Method: zip.Deflate}
			body := m.body
			h.SetMode(0o644)
			if m.symlink != "" {
				h.SetMode(os.ModeSymlink | 0o777)
				body = m.symlink
			}
			w, err := zw.CreateHeader(h)
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
	} else {
		var w = &buf
		var zw *gzip.Writer
		tw := tar.NewWriter(w)
		if format == "tgz" {
			zw = gzip.NewWriter(w)
			tw = tar.NewWriter(zw)
		}
		for _, m := range members {
			h := &tar.Header{Name: m.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(m.body))}
			switch {
			case m.symlink != "":
				h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, m.symlink, 0
			case m.hardlink != "":
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, m.hardlink, 0
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if h.Size > 0 {
				if _, err := tw.Write([]byte(m.body)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if zw != nil {
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := filepath.Join(dir, "a."+format)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestArchiveAttacks unpacks hostile archives of every format: none may
// write outside the unpack directory, and each refusal names the entry.
func TestArchiveAttacks(t *testing.T) {
	for _, format := range []string{"tar", "tgz", "zip"} {
		for _, tc := range []struct {
			name    string
			members func(outside string) []member
			want    string // "" means unpacked, with outside untouched
			tarOnly bool
		}{
			{name: "dot-dot", members: func(string) []member { return []member{{name: "../evil", body: "x"}} }, want: `"../evil" would be written outside`},
			{name: "absolute", members: func(o string) []member { return []member{{name: o, body: "x"}} }, want: "outside"},
			{name: "through a link", members: func(o string) []member {
				return []member{{name: "out", symlink: filepath.Dir(o)}, {name: "out/target", body: "x"}}
			}, want: `"out/target" goes through out`},
			{name: "symlink then file", members: func(o string) []member {
				return []member{{name: "x", symlink: o}, {name: "x", body: "pwned"}}
			}},
			{name: "relative symlink out", members: func(string) []member {
				return []member{{name: "a/up", symlink: "../../target"}}
			}, want: `entry "a/up": symbolic link to "../../target" points outside`},
			{name: "hardlink out", tarOnly: true, members: func(o string) []member {
				return []member{{name: "h", hardlink: o}}
			}, want: `entry "h"`},
			{name: "hardlink up", tarOnly: true, members: func(string) []member {
				return []member{{name: "h", hardlink: "../target"}}
			}, want: "outside"},
			{name: "hardlink to a symlink", tarOnly: true, members: func(o string) []member {
				return []member{{name: "s", symlink: o}, {name: "h", hardlink: "s"}}
			}, want: "not a regular file"},
		} {
			if tc.tarOnly && format == "zip" {
				continue
			}
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				dir := t.TempDir()
				outside := filepath.Join(dir, "target")
				if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
					t.Fatal(err)
				}
				a := buildArchive(t, dir, format, tc.members(outside))
				res := fsys.NewResolver(fsys.Options{})
				defer res.Close()
				cache := &archiveCache{root: filepath.Join(dir, "cache")}
				got, _, err := cache.unpack(context.Background(), res, a)
				if tc.want == "" && err != nil {
					t.Fatalf("unpack: %v", err)
				}
				if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				if b, _ := os.ReadFile(outside); string(b) != "precious" {
					t.Fatalf("the file outside the archive's directory now holds %q", b)
				}
				if tc.want == "" {
					st, err := os.Lstat(filepath.Join(got, "x"))
					if err != nil || !st.Mode().IsRegular() {
						t.Fatalf("x is %v (%v), want the archive's regular file", st, err)
					}
				}
				// A refused archive leaves nothing a later rank would use.
				if tc.want != "" {
					left, _ := filepath.Glob(filepath.Join(dir, "cache", "*"+format+"-*[0-9a-f]"))
					if len(left) > 0 {
						t.Fatalf("a refused unpack left %v", left)
					}
				}
			})
		}
	}
}

// TestArchiveBombs checks the bounds on unpacked bytes and entries, and
// that the error names the archive, the entry and the key to raise.
func TestArchiveBombs(t *testing.T) {
	zeros := strings.Repeat("\x00", 1<<20)
	many := make([]member, 20)
	for i := range many {
		many[i] = member{name: "f" + string(rune('a'+i)), body: "x"}
	}
	for _, format := range []string{"tar", "tgz", "zip"} {
		for _, tc := range []struct {
			name    string
			members []member
			lim     ArchiveLimits
			want    string
		}{
			{"bytes", []member{{name: "small", body: "x"}, {name: "bomb", body: zeros}}, ArchiveLimits{MaxBytes: 64 << 10}, `entry "bomb": more than 65536 bytes unpacked (raise spindle.archives.maxBytes`},
			{"entries", many, ArchiveLimits{MaxEntries: 10}, `entry "fk": more than 10 entries (raise spindle.archives.maxEntries`},
		} {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				dir := t.TempDir()
				a := buildArchive(t, dir, format, tc.members)
				res := fsys.NewResolver(fsys.Options{})
				defer res.Close()
				cache := &archiveCache{root: filepath.Join(dir, "cache"), lim: tc.lim}
				task := &Task{Archives: []string{a + "#env"}}
				_, err := prepareShipped(context.Background(), res, cache, task, filepath.Join(dir, "files"), "")
				// The archive as given (uri#alias), as the user typed it.
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), a+"#env") {
					t.Fatalf("err = %v, want the archive %s#env and %q", err, a, tc.want)
				}
			})
		}
	}
}

// TestArchiveCacheSharedByRanks runs the set-up of several ranks of one
// host at once: the archive is unpacked once, and every rank sees the
// same complete directory.
func TestArchiveCacheSharedByRanks(t *testing.T) {
	dir := t.TempDir()
	a := buildArchive(t, dir, "tgz", []member{{name: "bin/python", body: "#!/bin/sh\n"}, {name: "lib/x.py", body: "x = 1\n"}})
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	root := filepath.Join(dir, "cache")
	const ranks = 4
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		unpacked int
		dirs     = map[string]bool{}
		errs     []error
	)
	for r := 0; r < ranks; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cache := &archiveCache{root: root}
			got, did, err := cache.unpack(context.Background(), res, a)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			dirs[got] = true
			if did {
				unpacked++
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 || unpacked != 1 || len(dirs) != 1 {
		t.Fatalf("%d ranks: %d unpacked, directories %v, errors %v; want one unpack shared", ranks, unpacked, dirs, errs)
	}
	for d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "lib", "x.py")); err != nil || string(b) != "x = 1\n" {
			t.Fatalf("lib/x.py in %s: %q, %v", d, b, err)
		}
	}
	// Two executors' work directories link to the one unpacked copy.
	for _, w := range []string{"w1", "w2"} {
		files := filepath.Join(dir, w, "files")
		cache := &archiveCache{root: root}
		if _, err := prepareShipped(context.Background(), res, cache, &Task{Archives: []string{a + "#env"}}, files, ""); err != nil {
			t.Fatal(err)
		}
		if target, err := filepath.EvalSymlinks(filepath.Join(files, "env")); err != nil || !dirs[target] {
			t.Fatalf("%s/files/env resolves to %q (%v), want the shared %v", w, target, err, dirs)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, ".*")); len(left) > 0 {
		t.Fatalf("temporary files left in the cache: %v", left)
	}
}

// TestArchiveCacheRefusesForeignRoot refuses a cache directory others
// can write to (planted in a shared temporary directory).
func TestArchiveCacheRefusesForeignRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	c := &archiveCache{root: root}
	if err := c.ensureRoot(); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("err = %v, want a refusal of a world-writable cache", err)
	}
}
