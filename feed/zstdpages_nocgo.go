//go:build !cgo

package feed

// registerZstdPages keeps arrow-go's zstd codec: builds without cgo have
// no libzstd to put in front of it.
func registerZstdPages() {}
