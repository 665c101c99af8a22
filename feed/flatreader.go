package feed

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	feedpq "github.com/spindle-ml/spindle/feed/parquet"
)

// flatReader is a feedpq.FlatColumns whose errors about the file's bytes
// are bad input (ErrInput), as pqarrow's are once the split's reader
// names the file.
type flatReader struct {
	*feedpq.FlatColumns
}

var _ batchReader = flatReader{}

// newFlatReader reads the flat columns leaves of rowGroups (feedpq.NewFlatColumns).
func newFlatReader(pf *file.Reader, src io.ReaderAt, window int, rowGroups, leaves []int, fields []arrow.Field, alloc, batchAlloc memory.Allocator, batchRows int) flatReader {
	return flatReader{feedpq.NewFlatColumns(pf, src, window, rowGroups, leaves, fields, alloc, batchAlloc, batchRows)}
}

// Err returns the error that stopped Next, if any.
func (r flatReader) Err() error { return inputError(r.FlatColumns.Err()) }

// SeekToRow moves to row of the reader's row groups.
func (r flatReader) SeekToRow(row int64) error { return inputError(r.FlatColumns.SeekToRow(row)) }

// inputError makes an error about a column chunk's bytes (feedpq.ErrMalformed)
// bad input, keeping its text after ErrInput's.
func inputError(err error) error {
	if err != nil && errors.Is(err, feedpq.ErrMalformed) {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	return err
}
