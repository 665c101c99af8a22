package hdfstest

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestRenameSemantics(t *testing.T) {
	c := testCluster(t, Config{})
	cl := connect(t, c, c.Superuser())
	for _, d := range []string{"/r/a/sub", "/r/empty", "/r/full/x"} {
		if err := cl.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, cl, "/r/f1", []byte("1"))
	writeFile(t, cl, "/r/f2", []byte("2"))

	for _, tc := range []struct {
		name, src, dst string
		want           error  // an os error, or nil
		wantMsg        string // for errors without an os equivalent
	}{
		{"file over file", "/r/f1", "/r/f2", nil, ""},
		{"directory over empty directory", "/r/a", "/r/empty", nil, ""},
		{"directory over non-empty directory", "/r/empty", "/r/full", nil, "not empty"},
		{"into its own subtree", "/r/full", "/r/full/x/y", nil, "under source"},
		{"file over directory", "/r/f2", "/r/full", nil, "must both be"},
		{"missing destination parent", "/r/f2", "/r/nope/f", os.ErrNotExist, ""},
		{"missing source", "/r/nope", "/r/x", os.ErrNotExist, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cl.Rename(tc.src, tc.dst)
			switch {
			case tc.want == nil && tc.wantMsg == "":
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cl.Stat(tc.dst); err != nil {
					t.Fatalf("destination after rename: %v", err)
				}
				if _, err := cl.Stat(tc.src); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("source after rename: %v", err)
				}
			case tc.want != nil:
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
			default:
				var he interface{ Message() string }
				if !errors.As(err, &he) || !strings.Contains(he.Message(), tc.wantMsg) {
					t.Fatalf("got %v, want a remote error with %q", err, tc.wantMsg)
				}
			}
		})
	}
	if got := readFile(t, cl, "/r/f2"); string(got) != "1" {
		t.Fatalf("renamed-over file holds %q", got)
	}
	if fi, err := cl.Stat("/r/empty/sub"); err != nil || !fi.IsDir() {
		t.Fatalf("renamed directory's child: %v", err)
	}
}

func TestNamespaceErrors(t *testing.T) {
	c := testCluster(t, Config{})
	cl := connect(t, c, c.Superuser())
	writeFile(t, cl, "/file", []byte("x"))
	for _, tc := range []struct {
		name string
		op   func() error
		want string
	}{
		{"mkdir under a file", func() error { return cl.MkdirAll("/file/d", 0o755) }, "not a directory"},
		{"create under a file", func() error { _, err := cl.Create("/file/f"); return err }, "not a directory"},
		{"relative path", func() error { _, err := cl.Stat("relative"); return err }, "not absolute"},
		{"second writer", func() error {
			w, err := cl.Create("/open")
			if err != nil {
				return err
			}
			defer w.Close()
			other := connect(t, c, c.Superuser())
			_, err = other.CreateFile("/open", 1, testBlockSize, 0o644)
			return err
		}, "already exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if err == nil {
				t.Fatal("succeeded")
			}
			msg := err.Error()
			var he interface{ Message() string }
			if errors.As(err, &he) {
				msg += " " + he.Message()
			}
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("error %v, want %q", msg, tc.want)
			}
		})
	}
}
