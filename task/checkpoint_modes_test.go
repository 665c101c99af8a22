package task

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCheckpointIsPrivate: a checkpoint holds the model, so SaveCheckpoint
// makes it 0600 in directories it makes 0700, even under a umask that
// would let everyone read them.
func TestCheckpointIsPrivate(t *testing.T) {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "ckpt", "run")
	err := SaveCheckpoint(context.Background(), dir, "step-1", func(w io.Writer) error {
		_, err := w.Write([]byte("weights"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		filepath.Dir(dir):            0o700,
		dir:                          0o700,
		filepath.Join(dir, "step-1"): 0o600,
	} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
}
