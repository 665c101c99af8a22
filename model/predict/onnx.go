package predict

import (
	"errors"
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
)

// ElemType is an ONNX tensor element type (TensorProto.DataType).
type ElemType int32

// The ONNX element types batch inference can feed from Arrow columns.
const (
	ElemFloat   ElemType = 1
	ElemUint8   ElemType = 2
	ElemInt8    ElemType = 3
	ElemUint16  ElemType = 4
	ElemInt16   ElemType = 5
	ElemInt32   ElemType = 6
	ElemInt64   ElemType = 7
	ElemString  ElemType = 8
	ElemBool    ElemType = 9
	ElemFloat16 ElemType = 10
	ElemDouble  ElemType = 11
	ElemUint32  ElemType = 12
	ElemUint64  ElemType = 13
)

var elemNames = map[ElemType]string{
	ElemFloat: "float", ElemUint8: "uint8", ElemInt8: "int8", ElemUint16: "uint16", ElemInt16: "int16",
	ElemInt32: "int32", ElemInt64: "int64", ElemString: "string", ElemBool: "bool", ElemFloat16: "float16",
	ElemDouble: "double", ElemUint32: "uint32", ElemUint64: "uint64",
}

// String is the type's ONNX name, as in tensor(float).
func (t ElemType) String() string {
	if n, ok := elemNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", int32(t))
}

// Tensor describes one input or output of a model's graph.
type Tensor struct {
	Name string
	// Elem is the element type; 0 when the value is not a tensor (a
	// sequence or map, as scikit-learn classifiers' ZipMap output).
	Elem ElemType
	// Dims are the dimensions, -1 for a symbolic or unknown one (the
	// batch); nil when the shape is not declared.
	Dims []int64
}

// String describes the tensor as float[?,3].
func (t Tensor) String() string {
	if t.Elem == 0 {
		return t.Name + " (not a tensor)"
	}
	s := t.Elem.String() + "["
	for i, d := range t.Dims {
		if i > 0 {
			s += ","
		}
		if d < 0 {
			s += "?"
		} else {
			s += fmt.Sprint(d)
		}
	}
	return t.Name + " " + s + "]"
}

// Signature is what a model takes and gives.
type Signature struct {
	Inputs  []Tensor
	Outputs []Tensor
}

// errMalformed is wrapped by every error about an ONNX file's bytes.
var errMalformed = errors.New("not a valid ONNX model")

// ReadSignature reads the graph inputs and outputs of the ONNX model in
// the file at path. Inputs that an initializer provides (weights listed as
// inputs by older exporters) are left out: nobody feeds them.
func ReadSignature(path string) (Signature, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Signature{}, err
	}
	sig, err := parseModel(data)
	if err != nil {
		return Signature{}, fmt.Errorf("%s: %w", path, err)
	}
	return sig, nil
}

// parseModel reads the graph's inputs and outputs from an encoded
// ModelProto. The weights are not needed here, so external data files
// are not read.
func parseModel(data []byte) (Signature, error) {
	var m pb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		return Signature{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if m.GetGraph() == nil {
		return Signature{}, fmt.Errorf("%w: no graph", errMalformed)
	}
	init := map[string]bool{}
	for _, t := range m.GetGraph().GetInitializer() {
		init[t.GetName()] = true
	}
	var sig Signature
	for _, v := range m.GetGraph().GetInput() {
		if !init[v.GetName()] {
			sig.Inputs = append(sig.Inputs, tensorOf(v))
		}
	}
	for _, v := range m.GetGraph().GetOutput() {
		sig.Outputs = append(sig.Outputs, tensorOf(v))
	}
	if len(sig.Inputs) == 0 || len(sig.Outputs) == 0 {
		return Signature{}, fmt.Errorf("%w: the graph declares no inputs or no outputs", errMalformed)
	}
	return sig, nil
}

// tensorOf describes a graph value; Elem stays 0 for one that is not a
// tensor.
func tensorOf(v *pb.ValueInfoProto) Tensor {
	t := Tensor{Name: v.GetName()}
	tt := v.GetType().GetTensorType()
	if tt == nil {
		return t
	}
	t.Elem = ElemType(tt.GetElemType())
	if tt.GetShape() != nil {
		t.Dims = []int64{}
		for _, d := range tt.GetShape().GetDim() {
			if dv, ok := d.GetValue().(*pb.TensorShapeProto_Dimension_DimValue); ok {
				t.Dims = append(t.Dims, dv.DimValue)
			} else {
				t.Dims = append(t.Dims, -1)
			}
		}
	}
	return t
}
