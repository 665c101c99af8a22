package parquet

import (
	"errors"
	"io"
	"testing"
)

// A ColumnError matches ErrMalformed, unwraps to its cause and names its
// column, and its row group when it has one.
func TestColumnError(t *testing.T) {
	for _, tt := range []struct {
		rg   int
		want string
	}{
		{-1, "column x: unexpected EOF"},
		{3, "column x, row group 3: unexpected EOF"},
	} {
		err := columnError("x", tt.rg, io.ErrUnexpectedEOF)
		if !errors.Is(err, ErrMalformed) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%v: does not match ErrMalformed and its cause", err)
		}
		if err.Error() != tt.want {
			t.Errorf("%q, want %q", err, tt.want)
		}
	}
}
