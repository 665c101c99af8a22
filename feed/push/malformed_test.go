package push

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nameSchema is a pushed input with a string column.
var nameSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "label", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
}, nil)

// nameBatch is a batch of nameSchema with n rows whose string column has
// the given offsets (n+1 of them) over values: offsets out of order make
// a batch that Arrow's writer sends as it is and a reader decodes without
// complaint, but slicing it panics.
func nameBatch(t testing.TB, n int, offsets []int32, values string) arrow.RecordBatch {
	t.Helper()
	ids := array.NewInt64Builder(memory.DefaultAllocator)
	labels := array.NewFloat32Builder(memory.DefaultAllocator)
	for i := 0; i < n; i++ {
		ids.Append(int64(i))
		labels.Append(float32(i % 2))
	}
	data := array.NewData(arrow.BinaryTypes.String, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)), memory.NewBufferBytes([]byte(values))}, nil, 0, 0)
	names := array.NewStringData(data)
	return array.NewRecordBatch(nameSchema, []arrow.Array{ids.NewArray(), names, labels.NewArray()}, int64(n))
}

// TestPushRefusesMalformedBatch: a producer with a valid token pushes a
// batch whose string column's offsets go backwards. The endpoint refuses
// it, naming the column, feeds nothing of it, and goes on serving.
func TestPushRefusesMalformedBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := startPush(t, Config{Ranks: 2, BatchRows: 1, Schema: nameSchema})
	_, c := dialPush(t, s.Addr())

	good := nameBatch(t, 4, []int32{0, 1, 2, 3, 4}, "abcd")
	bad := nameBatch(t, 4, []int32{0, 9, 2, 3, 4}, "abcd") // row 0 ends past the values
	acks, err := push(ctx, c, testProducerToken, nameSchema, []arrow.RecordBatch{good, bad}, nil)
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
	if _, err := push(ctx, c, testProducerToken, nameSchema, []arrow.RecordBatch{good}, nil); err != nil {
		t.Fatalf("the next producer: %v", err)
	}
	if st := s.Stats(); st.Rows != 8 {
		t.Fatalf("rows taken %d, want 8", st.Rows)
	}
}
