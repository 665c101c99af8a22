package parquet

import "github.com/apache/arrow-go/v18/arrow/memory"

// freeCounter is an allocator that counts the bytes given back to it.
type freeCounter struct {
	memory.Allocator
	freed int64
}

// Free counts b and frees it.
func (c *freeCounter) Free(b []byte) {
	c.freed += int64(len(b))
	c.Allocator.Free(b)
}
