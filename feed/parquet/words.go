package parquet

import "unsafe"

// asWords views b as a slice of T, for copying fixed-width values a word
// at a time.
func asWords[T uint16 | uint32 | uint64](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
