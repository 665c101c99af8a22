package parquet

import "github.com/apache/arrow-go/v18/parquet/metadata"

// ChunkStart is where a column chunk's bytes begin: its dictionary page
// when it has one before its data pages, as arrow-go reads it.
func ChunkStart(cc *metadata.ColumnChunkMetaData) int64 {
	return FirstPage(cc.DataPageOffset(), cc.DictionaryPageOffset(), cc.HasDictionaryPage())
}

// FirstPage is where a column chunk whose data pages begin at data, and
// whose dictionary page (when hasDict) is at dict, begins (ChunkStart).
func FirstPage(data, dict int64, hasDict bool) int64 {
	if hasDict && dict > 0 && dict < data {
		return dict
	}
	return data
}

// ChunkSpan is the bytes of a row group's column chunks in the file, from
// the first chunk's start to the last one's end, as chunks are added.
type ChunkSpan struct {
	off, end int64 // off < 0 before the first chunk
}

// NewChunkSpan returns a span without chunks.
func NewChunkSpan() ChunkSpan { return ChunkSpan{off: -1} }

// Add takes in the chunk of size bytes at start.
func (s *ChunkSpan) Add(start, size int64) {
	if s.off < 0 || start < s.off {
		s.off = start
	}
	s.end = max(s.end, start+size)
}

// Bytes returns the span's offset and length; 0 and 0 without chunks.
func (s ChunkSpan) Bytes() (off, length int64) {
	off = max(s.off, 0)
	return off, max(s.end-off, 0)
}
