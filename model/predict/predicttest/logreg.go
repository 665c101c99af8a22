// Package predicttest builds small ONNX models for tests of batch
// inference, byte by byte from the ONNX protobuf's field numbers, so that
// tests need no Python package to make one.
package predicttest

import (
	"encoding/binary"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// LogReg describes a logistic regression: score = sigmoid(x·W + B) for a
// float input Input of shape [N, len(W)] and a float output Output of
// shape [N, 1].
type LogReg struct {
	Input, Output string
	W             []float32
	B             float32
}

// Write writes the model as an ONNX file (IR version 8, opset 13) at path.
func (m LogReg) Write(path string) error {
	return os.WriteFile(path, m.Bytes(), 0o644)
}

// Bytes is the model's ONNX encoding.
func (m LogReg) Bytes() []byte {
	var g []byte
	g = appendMsg(g, 1, node("MatMul", []string{m.Input, "W"}, "mm"))
	g = appendMsg(g, 1, node("Add", []string{"mm", "B"}, "logit"))
	g = appendMsg(g, 1, node("Sigmoid", []string{"logit"}, m.Output))
	g = protowire.AppendTag(g, 2, protowire.BytesType)
	g = protowire.AppendString(g, "logreg")
	g = appendMsg(g, 5, floatTensor("W", []int64{int64(len(m.W)), 1}, m.W))
	g = appendMsg(g, 5, floatTensor("B", []int64{1}, []float32{m.B}))
	g = appendMsg(g, 11, valueInfo(m.Input, 1, "N", int64(len(m.W))))
	g = appendMsg(g, 12, valueInfo(m.Output, 1, "N", 1))

	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 8)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "spindle-test")
	b = appendMsg(b, 7, g)
	var opset []byte
	opset = protowire.AppendTag(opset, 2, protowire.VarintType)
	opset = protowire.AppendVarint(opset, 13)
	return appendMsg(b, 8, opset)
}

func appendMsg(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// node is a NodeProto: inputs (1), output (2), op_type (4).
func node(op string, inputs []string, output string) []byte {
	var b []byte
	for _, in := range inputs {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, in)
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, output)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendString(b, op)
}

// floatTensor is a TensorProto: dims (1), data_type (2), name (8), raw_data (9).
func floatTensor(name string, dims []int64, vals []float32) []byte {
	var b []byte
	for _, d := range dims {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(d))
	}
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 8, protowire.BytesType)
	b = protowire.AppendString(b, name)
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	return protowire.AppendBytes(b, raw)
}

// valueInfo is a ValueInfoProto of a 2-D tensor whose first dimension is
// symbolic (batch) and second is cols.
func valueInfo(name string, elem uint64, batch string, cols int64) []byte {
	var d0, d1, shape, tt, typ, b []byte
	d0 = protowire.AppendTag(d0, 2, protowire.BytesType)
	d0 = protowire.AppendString(d0, batch)
	d1 = protowire.AppendTag(d1, 1, protowire.VarintType)
	d1 = protowire.AppendVarint(d1, uint64(cols))
	shape = appendMsg(shape, 1, d0)
	shape = appendMsg(shape, 1, d1)
	tt = protowire.AppendTag(tt, 1, protowire.VarintType)
	tt = protowire.AppendVarint(tt, elem)
	tt = appendMsg(tt, 2, shape)
	typ = appendMsg(typ, 1, tt)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, name)
	return appendMsg(b, 2, typ)
}
