package executor

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// FuzzExtract unpacks archives of any bytes as tar, gzipped tar and zip:
// whatever an archive holds, nothing outside the unpack directory is
// written, replaced or linked to, and an error is an error, never a
// panic (testdata/fuzz/FuzzExtract holds the crashers found). Seeds are
// the attacks of TestArchiveAttacks that name the file outside by a
// relative path, which the fuzzer can reach.
func FuzzExtract(f *testing.F) {
	attacks := [][]member{
		{{name: "a/b", body: "x"}, {name: "a/c", symlink: "b"}, {name: "d", hardlink: "a/b"}},
		{{name: "../outside", body: "x"}},
		{{name: "x", symlink: "../outside"}, {name: "x", body: "pwned"}},
		{{name: "up", symlink: ".."}, {name: "up/outside", body: "pwned"}},
		{{name: "h", hardlink: "../outside"}},
		{{name: "s", symlink: "/"}, {name: "h", hardlink: "s"}},
	}
	dir := f.TempDir()
	for _, format := range []string{"tar", "tgz", "zip"} {
		for _, m := range attacks {
			b, err := os.ReadFile(buildArchive(f, dir, format, m))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, format := range []string{"tar", "tgz", "zip"} {
			root := t.TempDir()
			outside := filepath.Join(root, "outside")
			archive := filepath.Join(root, "archive")
			if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(archive, b, 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := os.Open(archive)
			if err != nil {
				t.Fatal(err)
			}
			_ = extract(a, format, filepath.Join(root, "d"), ArchiveLimits{MaxBytes: 1 << 20, MaxEntries: 1000})
			a.Close()
			checkOutsideUntouched(t, root, outside)
		}
	})
}

// checkOutsideUntouched fails t when root holds anything but the archive,
// the unpack directory d and the file outside as it was, unlinked.
func checkOutsideUntouched(t *testing.T, root, outside string) {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n != "archive" && n != "outside" && n != "d" {
			t.Fatalf("unpacking made %s outside its directory", filepath.Join(root, n))
		}
	}
	st, err := os.Lstat(outside)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != fs.FileMode(0o644) {
		t.Fatalf("the file outside is now %v (%v)", st, err)
	}
	if n := st.Sys().(*syscall.Stat_t).Nlink; n != 1 {
		t.Fatalf("the file outside has %d links: the archive linked to it", n)
	}
	if b, _ := os.ReadFile(outside); string(b) != "precious" {
		t.Fatalf("the file outside now holds %q", b)
	}
}
