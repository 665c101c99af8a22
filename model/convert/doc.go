// Package convert turns the checkpoints of Spindle's own trainers into
// ONNX models and ONNX models back into their weights: the frontend and
// backend of the model store, written in Go so that no Python is needed.
//
//   - A logistic-regression checkpoint (examples/logreg's logreg.json)
//     becomes features -> Cast(double) -> MatMul -> Add -> Sigmoid ->
//     probability, with the weights as double initializers, so the
//     model's scores are the trainer's own.
//   - A parameter-server table becomes an embedding lookup: ids ->
//     LabelEncoder (sparse keys to rows; unknown keys to a zero row) ->
//     Gather -> ReduceSum or ReduceMean over the ids of a row, optionally
//     -> Sigmoid. Dense tables (rows 0..n-1) skip the LabelEncoder.
//
// Tables too large for one protobuf go to ONNX external-data files
// (package model/onnx, Encode).
package convert
