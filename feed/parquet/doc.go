// Package parquet reads Parquet files below arrow-go's pqarrow, where
// that is what limits how fast a rank is fed.
//
// FlatColumns decodes flat fixed-width columns, and dictionary-encoded
// string columns, straight from their pages into Arrow buffers: it finds
// each page in the column chunk with a window over the file, parses the
// page header itself (a Thrift compact reader of the few fields it
// needs), decompresses with arrow-go's codecs and reads definition
// levels into a validity bitmap without expanding them. FlatFields says
// which columns of a file it reads; the feed reads the others with
// pqarrow.
//
// A FooterIndex is a file's footer read once without allocating per
// field, so that planning and each executor parse only the part they
// need (Thin): the footer without column statistics, or thinned to a
// rank's row groups.
//
// Errors about a column chunk's bytes are *ColumnError values matching
// ErrMalformed; the feed reports them as bad input naming the file.
package parquet
