// Package controlpb holds the gRPC definitions of Spindle's control plane
// (control.proto) and the code generated from them. Regenerate with
// `make proto`; `make proto-check` fails when the committed code drifts.
package controlpb

//go:generate ../../scripts/protoc.sh
