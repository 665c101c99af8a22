package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
	"github.com/spindle-ml/spindle/model/store"
)

// Signature returns the graph's inputs (less any that initializers give
// values to, as older exporters list them) and outputs, as a manifest
// records them.
func Signature(m *pb.ModelProto) (inputs, outputs []store.Tensor) {
	init := map[string]bool{}
	for _, t := range m.GetGraph().GetInitializer() {
		init[t.Name] = true
	}
	for _, v := range m.GetGraph().GetInput() {
		if !init[v.Name] {
			inputs = append(inputs, describe(v))
		}
	}
	for _, v := range m.GetGraph().GetOutput() {
		outputs = append(outputs, describe(v))
	}
	return inputs, outputs
}

// describe turns a value's type into a manifest tensor.
func describe(v *pb.ValueInfoProto) store.Tensor {
	t := store.Tensor{Name: v.Name, Type: TypeName(v.GetType())}
	if tt := v.GetType().GetTensorType(); tt != nil {
		t.Shape = []int64{}
		for _, d := range tt.GetShape().GetDim() {
			if dv, ok := d.Value.(*pb.TensorShapeProto_Dimension_DimValue); ok {
				t.Shape = append(t.Shape, dv.DimValue)
			} else {
				t.Shape = append(t.Shape, -1)
			}
		}
	}
	return t
}

// ElemName is an element type's name, lower case: "float", "int64", ...
func ElemName(elem int32) string {
	if s, ok := pb.TensorProto_DataType_name[elem]; ok {
		return strings.ToLower(s)
	}
	return fmt.Sprintf("type%d", elem)
}

// TypeName spells a value type: "float" for a tensor of floats,
// "seq(map(int64,float))" for what scikit-learn's classifiers give.
func TypeName(t *pb.TypeProto) string {
	switch v := t.GetValue().(type) {
	case *pb.TypeProto_TensorType:
		return ElemName(v.TensorType.ElemType)
	case *pb.TypeProto_SequenceType:
		return "seq(" + TypeName(v.SequenceType.ElemType) + ")"
	case *pb.TypeProto_MapType:
		return "map(" + ElemName(v.MapType.KeyType) + "," + TypeName(v.MapType.ValueType) + ")"
	case *pb.TypeProto_OptionalType:
		return "optional(" + TypeName(v.OptionalType.ElemType) + ")"
	}
	return "unknown"
}

// Initializer returns the graph's constant tensor called name.
func Initializer(m *pb.ModelProto, name string) (*pb.TensorProto, bool) {
	for _, t := range m.GetGraph().GetInitializer() {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// Float64s returns a float or double tensor's values as float64.
func Float64s(t *pb.TensorProto) ([]float64, error) {
	n := numel(t.Dims)
	var out []float64
	switch {
	case t.DataType == Double && len(t.RawData) > 0:
		out = make([]float64, len(t.RawData)/8)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.RawData[8*i:]))
		}
	case t.DataType == Double:
		out = append(out, t.DoubleData...)
	case t.DataType == Float && len(t.RawData) > 0:
		out = make([]float64, len(t.RawData)/4)
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.RawData[4*i:])))
		}
	case t.DataType == Float:
		for _, v := range t.FloatData {
			out = append(out, float64(v))
		}
	default:
		return nil, fmt.Errorf("tensor %s is %s, not float or double", t.Name, ElemName(t.DataType))
	}
	if int64(len(out)) != n {
		return nil, fmt.Errorf("tensor %s: %d values for shape %v", t.Name, len(out), t.Dims)
	}
	return out, nil
}

// Int64s returns an int64 tensor's values.
func Int64s(t *pb.TensorProto) ([]int64, error) {
	if t.DataType != Int64 {
		return nil, fmt.Errorf("tensor %s is %s, not int64", t.Name, ElemName(t.DataType))
	}
	out := t.Int64Data
	if len(t.RawData) > 0 {
		out = make([]int64, len(t.RawData)/8)
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(t.RawData[8*i:]))
		}
	}
	if int64(len(out)) != numel(t.Dims) {
		return nil, fmt.Errorf("tensor %s: %d values for shape %v", t.Name, len(out), t.Dims)
	}
	return out, nil
}

func numel(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}
