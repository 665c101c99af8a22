// Package model is the room for models that leave Spindle: the model
// store (package model/store), ONNX export and import of Spindle's own
// trainers' checkpoints (package model/onnx and its users), and the
// commands built on them (spindle model export, list and show).
package model
