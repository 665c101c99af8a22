package flighttest

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestEndpointGetsAndReadOnce: DoGet calls are counted per endpoint, and
// a ReadOnce flight serves each endpoint's stream once.
func TestEndpointGetsAndReadOnce(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	eps := [][]arrow.RecordBatch{{rec}, {rec}}
	srv := Start(t, "", map[string]Flight{"many": {Schema: sc, Endpoints: eps}, "once": {Schema: sc, Endpoints: eps, ReadOnce: true}})
	c, err := flight.NewClientWithMiddleware(srv.Addr(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	read := func(ticket string) (int64, error) {
		stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: []byte(ticket)})
		if err != nil {
			return 0, err
		}
		rd, err := flight.NewRecordReader(stream)
		if err != nil {
			return 0, err
		}
		defer rd.Release()
		var n int64
		for {
			r, err := rd.Read()
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			n += r.NumRows()
		}
	}
	for _, ticket := range []string{"many#0", "many#0", "many#1", "once#1"} {
		if n, err := read(ticket); err != nil || n != 3 {
			t.Fatalf("read %s: %d rows, %v; want 3 rows", ticket, n, err)
		}
	}
	if _, err := read("once#1"); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a second read of a read-once endpoint: %v, want FailedPrecondition", err)
	}
	for _, want := range []struct {
		path string
		i    int
		n    int64
	}{{"many", 0, 2}, {"many", 1, 1}, {"once", 0, 0}, {"once", 1, 2}} {
		if got := srv.EndpointGets(want.path, want.i); got != want.n {
			t.Errorf("EndpointGets(%s, %d) = %d, want %d", want.path, want.i, got, want.n)
		}
	}
}
