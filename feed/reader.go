package feed

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

// Reader yields Arrow record batches. Next returns io.EOF after the last
// batch. The caller owns each returned batch and must Release it.
type Reader interface {
	Schema() *arrow.Schema
	Next(ctx context.Context) (arrow.RecordBatch, error)
	Close() error
}
