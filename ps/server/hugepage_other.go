//go:build !linux

package server

// adviseHuge does nothing where the kernel's transparent huge pages are
// not known to this package.
func adviseHuge[T any](s []T) {}
