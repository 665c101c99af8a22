package push

import (
	"context"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/flighttest"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPushRefusesMalformedBatch: a producer with a valid token pushes a
// batch whose string column's offsets go backwards. The endpoint refuses
// it, naming the column, feeds nothing of it, and goes on serving.
func TestPushRefusesMalformedBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	s := startPush(t, Config{Ranks: 2, BatchRows: 1, Schema: flighttest.NameSchema})
	_, c := dialPush(t, s.Addr())

	good := flighttest.NameBatch(4, []int32{0, 1, 2, 3, 4}, "abcd")
	bad := flighttest.NameBatch(4, []int32{0, 9, 2, 3, 4}, "abcd") // row 0 ends past the values
	acks, err := push(ctx, c, testProducerToken, flighttest.NameSchema, []arrow.RecordBatch{good, bad}, nil)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `column "name"`) {
		t.Fatalf("a batch with offsets out of order: %v, want InvalidArgument naming column \"name\"", err)
	}
	if acks != 1 {
		t.Fatalf("%d batches acknowledged, want the good one", acks)
	}
	if st := s.Stats(); st.Rows != 4 || st.RefusedBy[RefusedMalformed] != 1 {
		t.Fatalf("stats after a malformed batch: %+v", st)
	}
	// The endpoint is still there and takes the next producer's rows.
	if _, err := push(ctx, c, testProducerToken, flighttest.NameSchema, []arrow.RecordBatch{good}, nil); err != nil {
		t.Fatalf("the next producer: %v", err)
	}
	if st := s.Stats(); st.Rows != 8 {
		t.Fatalf("rows taken %d, want 8", st.Rows)
	}
}

// TestPushRefusesHugeSchema: a producer with a valid token opens a stream
// whose schema message, a few dozen bytes, claims two billion fields. The
// endpoint refuses it before arrow-go decodes it (which would allocate
// them all and end the driver beyond any recover) and goes on serving.
func TestPushRefusesHugeSchema(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	s := startPush(t, Config{Ranks: 1, BatchRows: 1, Schema: flighttest.NameSchema})
	_, c := dialPush(t, s.Addr())
	stream, err := c.DoPut(bearer(ctx, testProducerToken))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&flight.FlightData{DataHeader: flighttest.HugeSchemaMessage(1<<31 - 1)}); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	for err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "fields") {
		t.Fatalf("a schema claiming 2^31-1 fields: %v, want InvalidArgument saying so", err)
	}
	good := flighttest.NameBatch(4, []int32{0, 1, 2, 3, 4}, "abcd")
	if _, err := push(ctx, c, testProducerToken, flighttest.NameSchema, []arrow.RecordBatch{good}, nil); err != nil {
		t.Fatalf("the next producer: %v", err)
	}
}
