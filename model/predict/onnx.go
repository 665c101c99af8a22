package predict

import (
	"errors"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
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

// field calls fn for each field of the message in b.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(l))
		}
		b = b[l:]
		var v []byte
		var n uint64
		switch typ {
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			n, l = protowire.ConsumeVarint(b)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(l))
		}
		b = b[l:]
		if err := fn(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}

// parseModel reads ModelProto.graph (7): its inputs (11), outputs (12) and
// initializer names (5).
func parseModel(data []byte) (Signature, error) {
	var graph []byte
	err := fields(data, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 7 && typ == protowire.BytesType {
			graph = v
		}
		return nil
	})
	if err != nil {
		return Signature{}, err
	}
	if graph == nil {
		return Signature{}, fmt.Errorf("%w: no graph", errMalformed)
	}
	var sig Signature
	inits := map[string]bool{}
	err = fields(graph, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 5:
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == 8 && typ == protowire.BytesType {
					inits[string(v)] = true
				}
				return nil
			})
		case 11, 12:
			t, err := parseValueInfo(v)
			if err != nil {
				return err
			}
			if num == 11 {
				sig.Inputs = append(sig.Inputs, t)
			} else {
				sig.Outputs = append(sig.Outputs, t)
			}
		}
		return nil
	})
	if err != nil {
		return Signature{}, err
	}
	kept := sig.Inputs[:0]
	for _, in := range sig.Inputs {
		if !inits[in.Name] {
			kept = append(kept, in)
		}
	}
	sig.Inputs = kept
	if len(sig.Inputs) == 0 || len(sig.Outputs) == 0 {
		return Signature{}, fmt.Errorf("%w: the graph declares no inputs or no outputs", errMalformed)
	}
	return sig, nil
}

// parseValueInfo reads ValueInfoProto: name (1), type (2) whose
// tensor_type (1) has elem_type (1) and shape (2).
func parseValueInfo(b []byte) (Tensor, error) {
	var t Tensor
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			t.Name = string(v)
		case num == 2 && typ == protowire.BytesType:
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == 1 && typ == protowire.BytesType {
					return parseTensorType(v, &t)
				}
				return nil
			})
		}
		return nil
	})
	return t, err
}

func parseTensorType(b []byte, t *Tensor) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			t.Elem = ElemType(int32(n))
		case num == 2 && typ == protowire.BytesType:
			t.Dims = []int64{}
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != 1 || typ != protowire.BytesType {
					return nil
				}
				d := int64(-1)
				err := fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, n uint64) error {
					if num == 1 && typ == protowire.VarintType {
						d = int64(n)
					}
					return nil
				})
				t.Dims = append(t.Dims, d)
				return err
			})
		}
		return nil
	})
}
