package parquet

import (
	"errors"
	"fmt"
)

// ErrMalformed is matched (errors.Is) by every error about the bytes of a
// column chunk the decoder reads: a page header, levels, values or a
// dictionary that is not what the file's metadata promises, or bytes that
// could not be read where the metadata says they are. The feed reports
// such an error as bad input naming the file.
var ErrMalformed = errors.New("parquet: malformed column chunk")

// ColumnError is an error reading one column of a Parquet file. It
// matches ErrMalformed and unwraps to what went wrong.
type ColumnError struct {
	Column   string
	RowGroup int // the file's row group; -1 when the error is not about one
	Err      error
}

// Error says which column, and which row group when known, went wrong.
func (e *ColumnError) Error() string {
	if e.RowGroup < 0 {
		return fmt.Sprintf("column %s: %v", e.Column, e.Err)
	}
	return fmt.Sprintf("column %s, row group %d: %v", e.Column, e.RowGroup, e.Err)
}

// Unwrap returns what went wrong.
func (e *ColumnError) Unwrap() error { return e.Err }

// Is reports whether target is ErrMalformed: every ColumnError is one.
func (e *ColumnError) Is(target error) bool { return target == ErrMalformed }

// columnError is a ColumnError for column in row group rg (-1: none).
func columnError(column string, rg int, err error) error {
	return &ColumnError{Column: column, RowGroup: rg, Err: err}
}
