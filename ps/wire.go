package ps

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// The wire carries keys and values as little-endian arrays in bytes
// fields. On a little-endian host (every one Spindle runs on) these
// conversions are views, not copies: the hot path moves no key twice.

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// KeyBytes returns keys as wire bytes.
func KeyBytes(keys []uint64) []byte {
	if len(keys) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(keys))), len(keys)*8)
	}
	b := make([]byte, len(keys)*8)
	for i, k := range keys {
		binary.LittleEndian.PutUint64(b[i*8:], k)
	}
	return b
}

// BytesKeys reads wire bytes as keys.
func BytesKeys(b []byte) ([]uint64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("keys field of %d bytes: not a whole number of uint64s", len(b))
	}
	if len(b) == 0 {
		return nil, nil
	}
	if littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0 {
		return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8), nil
	}
	out := make([]uint64, len(b)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[i*8:])
	}
	return out, nil
}

// FloatBytes returns values as wire bytes.
func FloatBytes(values []float32) []byte {
	if len(values) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(values))), len(values)*4)
	}
	b := make([]byte, len(values)*4)
	for i, v := range values {
		binary.LittleEndian.PutUint32(b[i*4:], *(*uint32)(unsafe.Pointer(&v)))
	}
	return b
}

// BytesFloats reads wire bytes as float32s.
func BytesFloats(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("values field of %d bytes: not a whole number of float32s", len(b))
	}
	if len(b) == 0 {
		return nil, nil
	}
	if littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4), nil
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		u := binary.LittleEndian.Uint32(b[i*4:])
		out[i] = *(*float32)(unsafe.Pointer(&u))
	}
	return out, nil
}
