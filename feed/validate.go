package feed

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ValidateBatch checks every column of a batch that came from another
// process (pushed by a producer, pulled from a Flight service) before
// anything slices or deals it: offsets within their buffers and
// non-decreasing, valid UTF-8, lengths that agree. A malformed batch
// would otherwise panic whatever reads it first. The error names the
// column.
func ValidateBatch(rec arrow.RecordBatch) (err error) {
	col := -1
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("column %q: malformed Arrow data: %v", colName(rec, col), p)
		}
	}()
	n := rec.NumRows()
	for i := 0; i < int(rec.NumCols()); i++ {
		col = i
		c := rec.Column(i)
		if int64(c.Len()) != n {
			return fmt.Errorf("column %q has %d rows, the batch %d", colName(rec, i), c.Len(), n)
		}
		if err := array.ValidateFull(c); err != nil {
			return fmt.Errorf("column %q: %w", colName(rec, i), err)
		}
	}
	return nil
}

func colName(rec arrow.RecordBatch, i int) string {
	if i < 0 || i >= int(rec.NumCols()) {
		return "?"
	}
	return rec.ColumnName(i)
}

// recoverDecode, deferred by a function that hands a file's bytes to a
// third-party decoder (arrow-go's IPC and Parquet readers, flatbuffers,
// thrift), turns the decoder's panic on damaged bytes into one input error
// naming the file, in *err.
func recoverDecode(uri, what string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%w: %s is not a valid %s or is damaged (its decoder failed: %v)", ErrInput, uri, what, p)
	}
}
