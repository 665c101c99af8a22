package fsys

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLocalModes: CreateAtomic and MkdirAll honour the umask as
// os.Create and mkdir -p do; CreatePrivate and MkdirPrivate make what
// only the owner can read, whatever the umask.
func TestLocalModes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		umask             os.FileMode
		file, dir         os.FileMode
		privFile, privDir os.FileMode
	}{
		{0o022, 0o644, 0o755, 0o600, 0o700},
		{0o077, 0o600, 0o700, 0o600, 0o700},
		{0o002, 0o664, 0o775, 0o600, 0o700},
	} {
		t.Run(tc.umask.String(), func(t *testing.T) {
			old := syscall.Umask(int(tc.umask))
			saved := umask
			umask = tc.umask
			defer func() { syscall.Umask(old); umask = saved }()

			root := t.TempDir()
			check := func(name string, want os.FileMode) {
				t.Helper()
				st, err := os.Stat(filepath.Join(root, name))
				if err != nil {
					t.Fatal(err)
				}
				if got := st.Mode().Perm(); got != want {
					t.Errorf("%s: mode %v, want %v under umask %v", name, got, want, tc.umask)
				}
			}
			write := func(create func(context.Context, string) (AtomicFile, error), name string) {
				t.Helper()
				af, err := create(ctx, filepath.ToSlash(filepath.Join(root, name)))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := af.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
				if err := af.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			l := Local()
			if err := l.MkdirAll(ctx, filepath.ToSlash(filepath.Join(root, "pub/sub"))); err != nil {
				t.Fatal(err)
			}
			if err := MkdirPrivate(ctx, l, filepath.ToSlash(filepath.Join(root, "priv/sub"))); err != nil {
				t.Fatal(err)
			}
			write(l.CreateAtomic, "pub/sub/f")
			write(func(ctx context.Context, n string) (AtomicFile, error) { return CreatePrivate(ctx, l, n) }, "priv/sub/f")
			check("pub", tc.dir)
			check("pub/sub", tc.dir)
			check("pub/sub/f", tc.file)
			check("priv", tc.privDir)
			check("priv/sub", tc.privDir)
			check("priv/sub/f", tc.privFile)
		})
	}
}
