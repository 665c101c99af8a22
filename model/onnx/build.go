package onnx

import (
	"encoding/binary"
	"math"

	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
)

// IRVersion is the ONNX IR version of the models Spindle writes: IR 8
// (ONNX 1.10 and later), which every ONNX Runtime since 1.10 loads.
const IRVersion = 8

// Operator set versions Spindle's graphs are written against.
const (
	// OpsetDefault is the default ("") domain's version: 13, where
	// ReduceSum takes its axes as an input.
	OpsetDefault = 13
	// OpsetML is the ai.onnx.ml domain's version: 2, whose LabelEncoder
	// maps int64 keys to int64 values.
	OpsetML = 2
	// DomainML is the classical machine-learning operators' domain.
	DomainML = "ai.onnx.ml"
)

// Element types, as TensorProto.data_type and TypeProto.Tensor.elem_type.
const (
	Float  = int32(pb.TensorProto_FLOAT)
	Double = int32(pb.TensorProto_DOUBLE)
	Int64  = int32(pb.TensorProto_INT64)
)

// NewModel wraps graph in a model using the default and ML operator sets.
func NewModel(graph *pb.GraphProto, producerVersion string) *pb.ModelProto {
	return &pb.ModelProto{
		IrVersion:       IRVersion,
		ProducerName:    "spindle",
		ProducerVersion: producerVersion,
		Graph:           graph,
		OpsetImport: []*pb.OperatorSetIdProto{
			{Domain: "", Version: OpsetDefault},
			{Domain: DomainML, Version: OpsetML},
		},
	}
}

// Node returns an operator application of the default domain.
func Node(op, name string, inputs, outputs []string, attrs ...*pb.AttributeProto) *pb.NodeProto {
	return &pb.NodeProto{OpType: op, Name: name, Input: inputs, Output: outputs, Attribute: attrs}
}

// AttrInt is an integer attribute.
func AttrInt(name string, v int64) *pb.AttributeProto {
	return &pb.AttributeProto{Name: name, Type: pb.AttributeProto_INT, I: v}
}

// AttrInts is an integer-list attribute.
func AttrInts(name string, v []int64) *pb.AttributeProto {
	return &pb.AttributeProto{Name: name, Type: pb.AttributeProto_INTS, Ints: v}
}

// Value returns the type of a graph input or output: a tensor of elem
// with dims, where a negative dimension is a symbolic one named "N"
// (the batch).
func Value(name string, elem int32, dims ...int64) *pb.ValueInfoProto {
	shape := &pb.TensorShapeProto{}
	for _, d := range dims {
		dim := &pb.TensorShapeProto_Dimension{}
		if d < 0 {
			dim.Value = &pb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}
		} else {
			dim.Value = &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &pb.ValueInfoProto{Name: name, Type: &pb.TypeProto{
		Value: &pb.TypeProto_TensorType{TensorType: &pb.TypeProto_Tensor{ElemType: elem, Shape: shape}},
	}}
}

// DoubleTensor is a float64 tensor, stored as little-endian raw data.
func DoubleTensor(name string, dims []int64, v []float64) *pb.TensorProto {
	raw := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(x))
	}
	return &pb.TensorProto{Name: name, DataType: Double, Dims: dims, RawData: raw}
}

// FloatTensor is a float32 tensor, stored as little-endian raw data.
func FloatTensor(name string, dims []int64, v []float32) *pb.TensorProto {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	return &pb.TensorProto{Name: name, DataType: Float, Dims: dims, RawData: raw}
}

// Int64Tensor is an int64 tensor, stored as little-endian raw data.
func Int64Tensor(name string, dims []int64, v []int64) *pb.TensorProto {
	raw := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(x))
	}
	return &pb.TensorProto{Name: name, DataType: Int64, Dims: dims, RawData: raw}
}
