// Package predicttest builds small ONNX models for tests of batch
// inference, with the ONNX builders of package model/onnx, so that tests
// need no Python package to make one.
package predicttest

import (
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/model/onnx"
	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
)

// LogReg describes a logistic regression: score = sigmoid(x·W + B) for a
// float input Input of shape [N, len(W)] and a float output Output of
// shape [N, 1].
type LogReg struct {
	Input, Output string
	W             []float32
	B             float32
}

// Write writes the model as an ONNX file at path.
func (m LogReg) Write(path string) error {
	b, err := m.Bytes()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Bytes is the model's ONNX encoding.
func (m LogReg) Bytes() ([]byte, error) {
	graph := &pb.GraphProto{
		Name: "logreg",
		Node: []*pb.NodeProto{
			onnx.Node("MatMul", "mm", []string{m.Input, "W"}, []string{"mm"}),
			onnx.Node("Add", "add", []string{"mm", "B"}, []string{"logit"}),
			onnx.Node("Sigmoid", "sigmoid", []string{"logit"}, []string{m.Output}),
		},
		Initializer: []*pb.TensorProto{
			onnx.FloatTensor("W", []int64{int64(len(m.W)), 1}, m.W),
			onnx.FloatTensor("B", []int64{1}, []float32{m.B}),
		},
		Input:  []*pb.ValueInfoProto{onnx.Value(m.Input, onnx.Float, -1, int64(len(m.W)))},
		Output: []*pb.ValueInfoProto{onnx.Value(m.Output, onnx.Float, -1, 1)},
	}
	return proto.Marshal(onnx.NewModel(graph, "test"))
}
