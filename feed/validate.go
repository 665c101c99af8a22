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
	if err := checkRowsHeld(rec); err != nil {
		return err
	}
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

// checkRowsHeld refuses a batch claiming more rows than its buffers could
// hold at a bit a row: one without columns, or whose columns carry no
// values (null type, empty structs, zero-width types), can claim any row
// count in a few bytes, and dealing or cutting it in batches would go on
// for ever.
func checkRowsHeld(rec arrow.RecordBatch) error {
	var held int64
	for _, c := range rec.Columns() {
		held += bufferBytes(c.Data())
	}
	if n := rec.NumRows(); n > 8*held+64 {
		return fmt.Errorf("the batch claims %d rows in %d bytes of column buffers (%d columns): a row takes at least a bit", n, held, rec.NumCols())
	}
	return nil
}

// bufferBytes is the size of the buffers of d, its children and its
// dictionary.
func bufferBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		if c != nil {
			n += bufferBytes(c)
		}
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		n += bufferBytes(d.Dictionary())
	}
	return n
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
