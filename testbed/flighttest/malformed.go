package flighttest

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// NameSchema is an input with a string column (id, name, label), the shape
// the malformed-batch tests of pushed and pulled input share.
var NameSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "label", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
}, nil)

// NameBatch is a batch of NameSchema with n rows whose string column has
// the given offsets (n+1 of them) over values: offsets out of order make a
// batch that Arrow's writer sends as it is and a reader decodes without
// complaint, but slicing it panics.
func NameBatch(n int, offsets []int32, values string) arrow.RecordBatch {
	ids := array.NewInt64Builder(memory.DefaultAllocator)
	labels := array.NewFloat32Builder(memory.DefaultAllocator)
	for i := 0; i < n; i++ {
		ids.Append(int64(i))
		labels.Append(float32(i % 2))
	}
	data := array.NewData(arrow.BinaryTypes.String, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)), memory.NewBufferBytes([]byte(values))}, nil, 0, 0)
	names := array.NewStringData(data)
	return array.NewRecordBatch(NameSchema, []arrow.Array{ids.NewArray(), names, labels.NewArray()}, int64(n))
}
