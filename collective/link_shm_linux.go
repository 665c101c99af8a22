//go:build linux

package collective

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapShared maps the first size bytes of f, shared with every process
// that maps the same file.
func mapShared(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func unmapShared(b []byte) { unix.Munmap(b) }

// reserve sizes f to size bytes and allocates every page of it.
func reserve(f *os.File, size int) error {
	return unix.Fallocate(int(f.Fd()), 0, 0, int64(size))
}
