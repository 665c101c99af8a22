//go:build !linux

package collective

import (
	"errors"
	"os"
)

// mapShared fails: shared-memory rings are built on Linux only, and every
// stream elsewhere stays on TCP.
func mapShared(*os.File, int) ([]byte, error) {
	return nil, errors.New("shared-memory rings need Linux")
}

func unmapShared([]byte) {}

func reserve(f *os.File, size int) error { return f.Truncate(int64(size)) }
