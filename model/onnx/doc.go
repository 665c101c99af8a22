// Package onnx writes and reads ONNX models from Go, with Spindle's own
// definitions of the ONNX messages (package model/onnx/onnxpb): builders
// for graphs, tensors and typed inputs; encoding that moves large tensors
// into ONNX external-data files so that no protobuf nears its 2 GiB limit;
// loading that reads external data back; and the signature a model store
// manifest records.
package onnx
